// PostgreSQL as the record of accounts, keys and credits: written there first, and a hot path that
// lost them (a flushed Redis, a restarted memory run) is seeded again from it on first touch.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { hashApiKey } from '../../src/accounts/api-key.js';
import { createMemoryBackend, createRedisBackend, type HotBackend } from '../../src/billing/backends.js';
import { MovementConflict } from '../../src/record/money-movement.js';
import { recordedBackend } from '../../src/record/recorded-backend.js';
import { useTestDatabase } from '../helpers/test-database.js';

const record = useTestDatabase('recacct');
let redis: Redis;
const namespace = `t-recacct-${randomBytes(4).toString('hex')}`;

beforeAll(() => {
  redis = new Redis(inject('redisUrl'));
});

afterAll(async () => {
  const keys = await redis.keys(`${namespace}:*`);
  if (keys.length) await redis.del(...keys);
  await redis.quit();
});

async function wipeRedis(): Promise<void> {
  const keys = await redis.keys(`${namespace}:*`);
  if (keys.length) await redis.del(...keys);
}

// Each case: a hot path, and how to lose it (a fresh memory state; the namespace's Redis keys deleted).
const hotPaths: Array<[string, () => HotBackend, (old: HotBackend) => Promise<HotBackend>]> = [
  ['memory', () => createMemoryBackend({ keyMarker: 'tg' }), async () => createMemoryBackend({ keyMarker: 'tg' })],
  [
    'redis',
    () => createRedisBackend({ redis, namespace, keyMarker: 'tg' }),
    async (old) => {
      await wipeRedis();
      return old;
    },
  ],
];

describe.each(hotPaths)('record first, hot path %s', (_name, makeHot, lose) => {
  it('commits accounts and keys to PostgreSQL with only the secret hash, prefix and last four', async () => {
    const hot = makeHot();
    const { accounts } = recordedBackend(hot, record.db, 'tg');
    const acct = await accounts.createAccount('Rec');
    const { record: key, secret } = await accounts.createKey(acct.id, { name: 'ci', lifetimeCap: 500, monthlyCap: 200 });
    const rows = await record.db.query<Record<string, unknown>>('SELECT * FROM api_keys WHERE id = $1', [key.id]);
    expect(rows.rows).toHaveLength(1);
    const row = rows.rows[0] ?? {};
    expect(row).toMatchObject({ account_id: acct.id, secret_hash: hashApiKey(secret), name: 'ci', lifetime_cap: 500, monthly_cap: 200, revoked_at: null });
    expect(`${String(row.display_prefix)}…${String(row.last_four)}`).toBe(key.displayHint);
    expect(String(row.last_four)).toBe(secret.slice(-4));
    expect(JSON.stringify(row)).not.toContain(secret.slice(6, 30));
    expect((await record.db.query('SELECT name FROM accounts WHERE id = $1', [acct.id])).rows).toEqual([{ name: 'Rec' }]);
  });

  it('rebuilds a lost hot path from PostgreSQL on first touch: keys, caps, revocation, accounts', async () => {
    const hot = makeHot();
    const before = recordedBackend(hot, record.db, 'tg');
    const acct = await before.accounts.createAccount('Wiped');
    const live = await before.accounts.createKey(acct.id, { name: 'live' });
    const capped = await before.accounts.createKey(acct.id, { name: 'capped' });
    const gone = await before.accounts.createKey(acct.id, { name: 'gone' });
    expect(await before.accounts.setKeyCaps(acct.id, capped.record.id, { monthlyCap: 7 })).toBe(true);
    expect(await before.accounts.revokeKey(acct.id, gone.record.id)).toBe(true);
    const revokedAt = (await before.accounts.getKey(acct.id, gone.record.id))?.revokedAt;
    expect(revokedAt).toEqual(expect.any(Number));

    const fresh = await lose(hot);
    // The hot path alone no longer knows any of it.
    expect(await fresh.accounts.findKeyByHash(hashApiKey(live.secret))).toBeUndefined();
    expect(await fresh.accounts.getAccount(acct.id)).toBeUndefined();

    const after = recordedBackend(fresh, record.db, 'tg', { rebuildWindowMs: 20 });
    expect(await after.accounts.findKeyByHash(hashApiKey(live.secret))).toEqual(live.record);
    expect(await after.accounts.findKeyByHash(hashApiKey(capped.secret))).toMatchObject({ id: capped.record.id, monthlyCap: 7 });
    const stillRevoked = await after.accounts.findKeyByHash(hashApiKey(gone.secret));
    expect(stillRevoked?.revokedAt).toBe(revokedAt);
    // Seeded: the hot path itself answers now, as the reserve step reads it.
    expect(await fresh.accounts.getKey(acct.id, gone.record.id)).toMatchObject({ revokedAt });
    expect(await fresh.accounts.getKey(acct.id, capped.record.id)).toMatchObject({ monthlyCap: 7 });
    expect(await fresh.accounts.getAccount(acct.id)).toMatchObject({ id: acct.id, name: 'Wiped' });
    expect((await after.accounts.listKeys(acct.id)).map((k) => k.id).sort()).toEqual([live.record.id, capped.record.id, gone.record.id].sort());
    expect((await after.accounts.listAccounts()).map((a) => a.id)).toContain(acct.id);
    // A revoked key is refused by the reserve step after the rebuild (the account's money is loaded first).
    const refused = await after.ledger.reserve({ requestId: `r-${randomBytes(4).toString('hex')}`, accountId: acct.id, keyId: gone.record.id, amount: 1, holdTtlMs: 60_000 });
    expect(refused).toMatchObject({ admitted: false, reason: 'key_revoked' });
  });

  it('commits a credit to the ledger entries before the hot path, once per idempotency key', async () => {
    const hot = makeHot();
    const { accounts, ledger } = recordedBackend(hot, record.db, 'tg');
    const acct = await accounts.createAccount('Credit');
    expect(await ledger.credit(acct.id, 2_500_000, `c-${acct.id}`)).toBe(true);
    expect(await ledger.credit(acct.id, 2_500_000, `c-${acct.id}`)).toBe(false);
    await expect(ledger.credit(acct.id, 1, `c-${acct.id}`)).rejects.toThrow(MovementConflict);
    const entries = await record.db.query<{ kind: string; amount: number }>('SELECT kind, amount FROM ledger_entries WHERE account_id = $1', [acct.id]);
    expect(entries.rows).toEqual([{ kind: 'admin_credit', amount: 2_500_000 }]);
    expect((await ledger.balance(acct.id)).balance).toBe(2_500_000);
    // A credit to an account the record does not have is refused and reaches neither side.
    await expect(ledger.credit('acct_missing', 5, 'c-missing')).rejects.toThrow();
    expect((await hot.ledger.balance('acct_missing')).balance).toBe(0);
  });
});
