// Key state (revocation, caps) on its durable path, over a real Redis and a real PostgreSQL: copies of a
// key pushed out of order (a cap edit racing a revoke, a reload racing a revoke) never bring an older
// state back into Redis, and reconciliation finds a key whose state Redis lost and repairs it from the
// record. On ef46cfd the delayed older copy overwrote the revocation (`restoreKey` rewrote the whole
// record) and reconciliation compared no keys.
import { afterAll, describe, expect, it } from 'vitest';
import type { ApiKeyRecord, RestorableAccountStore } from '../../src/accounts/account-store.js';
import { hashApiKey } from '../../src/accounts/api-key.js';
import { createRedisBackend, type HotBackend } from '../../src/billing/backends.js';
import { redisKeys } from '../../src/billing/redis-keys.js';
import { reconcile } from '../../src/record/reconcile.js';
import { reconcileSources } from '../../src/record/reconcile-job.js';
import { recordedBackend } from '../../src/record/recorded-backend.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTestRedis } from '../helpers/test-redis.js';

const record = useTestDatabase('reckeys');
const testRedis = useTestRedis('t-reckeys');
let nsCounter = 0;
const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of closers) await c();
});

/**
 * The hot store with a gate on the pushes of keys: a push the test picks waits until released, so the
 * order in which two copies reach Redis is the test's, not the scheduler's. Everything else is the real
 * Redis store.
 */
function gatedHot(): { hot: HotBackend; namespace: string; hold: (pick: (r: ApiKeyRecord) => boolean) => { reached: Promise<void>; release: () => void } } {
  const namespace = `${testRedis.namespace}-${nsCounter++}`;
  const inner = createRedisBackend({ redis: testRedis.redis, namespace, keyMarker: 'tg' });
  const gates: Array<{ pick: (r: ApiKeyRecord) => boolean; reached: () => void; open: Promise<void> }> = [];
  const accounts = new Proxy(inner.accounts, {
    get(target, prop, receiver) {
      if (prop === 'restoreKey') {
        return async (rec: ApiKeyRecord, hash: string, version?: number) => {
          const at = gates.findIndex((g) => g.pick(rec));
          if (at >= 0) {
            const [gate] = gates.splice(at, 1);
            gate?.reached();
            await gate?.open;
          }
          return target.restoreKey(rec, hash, version);
        };
      }
      const v: unknown = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  }) as RestorableAccountStore;
  return {
    hot: { accounts, ledger: inner.ledger },
    namespace,
    hold(pick) {
      let reached = (): void => undefined;
      let release = (): void => undefined;
      const reachedP = new Promise<void>((r) => (reached = r));
      const open = new Promise<void>((r) => (release = r));
      gates.push({ pick, reached, open });
      return { reached: reachedP, release };
    },
  };
}

async function world() {
  const g = gatedHot();
  const backend = recordedBackend(g.hot, record.db, 'tg', {});
  closers.push(() => backend.accounts.close());
  const acct = await backend.accounts.createAccount('keys');
  await backend.ledger.credit(acct.id, 1_000_000, `fund-${acct.id}`);
  const key = await backend.accounts.createKey(acct.id, { name: 'k', lifetimeCap: 500_000 });
  return { ...g, backend, accountId: acct.id, keyId: key.record.id, secret: key.secret };
}

async function reserveOutcome(w: Awaited<ReturnType<typeof world>>) {
  return w.backend.ledger.reserve({ requestId: `r-${Math.random()}`, accountId: w.accountId, keyId: w.keyId, amount: 10, holdTtlMs: 60_000 });
}

describe('key state reaches Redis in version order', () => {
  it('a cap edit racing a revoke: the older (unrevoked) copy arriving last does not overwrite the revocation', async () => {
    const w = await world();
    // The cap edit's push (an unrevoked copy) is held back until the revocation has reached Redis.
    const gate = w.hold((r) => r.revokedAt === undefined && r.monthlyCap === 7_000);
    const capEdit = w.backend.accounts.setKeyCaps(w.accountId, w.keyId, { lifetimeCap: 400_000, monthlyCap: 7_000 });
    await gate.reached;
    expect(await w.backend.accounts.revokeKey(w.accountId, w.keyId)).toBe(true);
    gate.release();
    expect(await capEdit).toBe(true);

    const hot = await w.hot.accounts.getKey(w.accountId, w.keyId);
    expect(hot?.revokedAt, 'Redis still has the revocation').toEqual(expect.any(Number));
    // The revocation's copy carries the cap edit too (it was committed first).
    expect(hot).toMatchObject({ lifetimeCap: 400_000, monthlyCap: 7_000 });
    expect(await w.hot.accounts.findKeyByHash(hashApiKey(w.secret))).toMatchObject({ revokedAt: expect.any(Number) });
    expect(await reserveOutcome(w)).toMatchObject({ admitted: false, reason: 'key_revoked' });
  });

  it('a reload of the account racing a revoke: the reload read before the revoke does not bring the key back', async () => {
    const w = await world();
    const gate = w.hold((r) => r.revokedAt === undefined && r.id === w.keyId);
    const reload = w.backend.accounts.restoreAccountKeys(w.accountId);
    await gate.reached;
    expect(await w.backend.accounts.revokeKey(w.accountId, w.keyId)).toBe(true);
    gate.release();
    await reload;
    expect((await w.hot.accounts.getKey(w.accountId, w.keyId))?.revokedAt).toEqual(expect.any(Number));
    expect(await reserveOutcome(w)).toMatchObject({ admitted: false, reason: 'key_revoked' });
  });

  it('a later cap edit still reaches Redis (versions go forward, not only revocations)', async () => {
    const w = await world();
    expect(await w.backend.accounts.setKeyCaps(w.accountId, w.keyId, { monthlyCap: 9 })).toBe(true);
    expect(await w.backend.accounts.setKeyCaps(w.accountId, w.keyId, { monthlyCap: 11 })).toBe(true);
    expect(await w.hot.accounts.getKey(w.accountId, w.keyId)).toMatchObject({ monthlyCap: 11 });
    expect((await w.hot.accounts.getKey(w.accountId, w.keyId))?.lifetimeCap).toBeUndefined();
    const pending = await record.db.query<{ n: number }>('SELECT count(*)::int AS n FROM api_keys WHERE hot_version < version AND id = $1', [w.keyId]);
    expect(pending.rows[0]?.n).toBe(0);
  });
});

describe('reconciliation compares keys and repairs Redis from the record', () => {
  it('a revocation and a cap Redis lost are reported once, then pushed again: the next pass finds nothing', async () => {
    const w = await world();
    const other = await w.backend.accounts.createKey(w.accountId, { name: 'other', monthlyCap: 5_000 });
    expect(await w.backend.accounts.revokeKey(w.accountId, w.keyId)).toBe(true);
    // Redis loses both (an older copy came back: a restart from an older snapshot, a lagging replica).
    const k = redisKeys(w.namespace);
    await testRedis.redis.hdel(k.key(w.accountId, w.keyId), 'revokedAt');
    await testRedis.redis.hdel(k.key(w.accountId, other.record.id), 'monthlyCap');
    expect(await reserveOutcome(w)).toMatchObject({ admitted: true });

    const books = reconcileSources(record.db, w.backend, undefined, undefined);
    const first = await reconcile(books, [w.accountId]);
    const fields = first.differences.map((d) => `${d.keyId} ${d.field} ${d.expected}->${d.actual}`).sort();
    expect(fields).toEqual([`${other.record.id} key_monthly_cap 5000->-1`, `${w.keyId} key_revoked 1->0`].sort());
    expect(first.accountsDiffering).toBe(1);

    // Repaired from the record: revoked again, the cap back, and the books agree.
    expect((await w.hot.accounts.getKey(w.accountId, w.keyId))?.revokedAt).toEqual(expect.any(Number));
    expect(await w.hot.accounts.getKey(w.accountId, other.record.id)).toMatchObject({ monthlyCap: 5_000 });
    const again = await reconcile(books, [w.accountId]);
    expect(again.differences).toEqual([]);
  });

  it("a key's max cost per request Redis lost is reported and pushed again", async () => {
    const w = await world();
    expect(await w.backend.accounts.updateKey(w.accountId, w.keyId, { maxCostPerRequest: 40_000 })).toBe(true);
    const k = redisKeys(w.namespace);
    expect(await testRedis.redis.hget(k.key(w.accountId, w.keyId), 'maxCost')).toBe('40000');
    await testRedis.redis.hdel(k.key(w.accountId, w.keyId), 'maxCost');

    const books = reconcileSources(record.db, w.backend, undefined, undefined);
    const first = await reconcile(books, [w.accountId]);
    expect(first.differences.map((d) => `${d.keyId} ${d.field} ${d.expected}->${d.actual}`)).toEqual([`${w.keyId} key_max_cost_per_request 40000->-1`]);
    expect(await w.hot.accounts.getKey(w.accountId, w.keyId)).toMatchObject({ maxCostPerRequest: 40_000 });
    expect((await reconcile(books, [w.accountId])).differences).toEqual([]);
  });
});
