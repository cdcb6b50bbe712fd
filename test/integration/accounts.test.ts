// One conformance suite for the account stores: memory, real Redis, and each with PostgreSQL as the record.
import { describe, expect, it } from 'vitest';
import type { AccountStore } from '../../src/accounts/account-store.js';
import { generateApiKey, hashApiKey } from '../../src/accounts/api-key.js';
import { createMemoryBackend, createRedisBackend } from '../../src/billing/backends.js';
import { RecordedAccountStore } from '../../src/record/recorded-account-store.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTestRedis } from '../helpers/test-redis.js';

const record = useTestDatabase('accounts');
const testRedis = useTestRedis('t-accounts');
const namespace = testRedis.namespace;

const backends: Array<[string, () => AccountStore]> = [
  ['memory', () => createMemoryBackend({ keyMarker: 'tg' }).accounts],
  ['redis', () => createRedisBackend({ redis: testRedis.redis, namespace, keyMarker: 'tg' }).accounts],
  ['memory over PostgreSQL', () => new RecordedAccountStore({ db: record.db, hot: createMemoryBackend({ keyMarker: 'tg' }).accounts, keyMarker: 'tg' })],
  ['redis over PostgreSQL', () => new RecordedAccountStore({ db: record.db, hot: createRedisBackend({ redis: testRedis.redis, namespace, keyMarker: 'tg' }).accounts, keyMarker: 'tg' })],
];

describe.each(backends)('account store (%s)', (_name, make) => {
  it('creates, reads and lists accounts', async () => {
    const store = make();
    const a = await store.createAccount('Alice');
    const b = await store.createAccount('Bob');
    expect(a.id).not.toBe(b.id);
    expect(await store.getAccount(a.id)).toEqual(a);
    expect(await store.getAccount('acct_missing')).toBeUndefined();
    const ids = (await store.listAccounts()).map((x) => x.id);
    expect(ids).toEqual(expect.arrayContaining([a.id, b.id]));
  });

  it('creates keys shown once, found by hash, listed without secrets', async () => {
    const store = make();
    const acct = await store.createAccount('Keys');
    const { record, secret } = await store.createKey(acct.id, { name: 'ci', lifetimeCap: 5_000_000 });
    expect(secret).toMatch(/^sk-tg-[A-Za-z0-9]{43}$/);
    expect(record).toMatchObject({ accountId: acct.id, name: 'ci', lifetimeCap: 5_000_000 });
    expect(record.monthlyCap).toBeUndefined();
    expect(record.revokedAt).toBeUndefined();
    expect(record.displayHint).toBe(`${secret.slice(0, 10)}…${secret.slice(-4)}`);
    expect(await store.findKeyByHash(hashApiKey(secret))).toEqual(record);
    expect(await store.findKeyByHash(hashApiKey(`${secret}x`))).toBeUndefined();
    expect(await store.getKey(acct.id, record.id)).toEqual(record);
    const second = await store.createKey(acct.id);
    expect(second.secret).not.toBe(secret);
    const listed = await store.listKeys(acct.id);
    expect(listed.map((k) => k.id).sort()).toEqual([record.id, second.record.id].sort());
    expect(JSON.stringify(listed)).not.toContain(secret.slice(6));
    await expect(store.createKey('acct_missing')).rejects.toThrow(/unknown account/);
  });

  it('imports an operator-chosen key idempotently and refuses a malformed one', async () => {
    const store = make();
    const acct = await store.createAccount('Demo');
    const other = await store.createAccount('Other');
    const secret = generateApiKey('tg');
    const first = await store.importKey(acct.id, secret, { name: 'demo', monthlyCap: 1000 });
    const again = await store.importKey(acct.id, secret);
    expect(again).toEqual(first);
    expect((await store.listKeys(acct.id)).length).toBe(1);
    await expect(store.importKey(other.id, secret)).rejects.toThrow(/another account/);
    await expect(store.importKey(acct.id, 'sk-tg-short')).rejects.toThrow(/too short/);
    await expect(store.importKey(acct.id, 'not-a-key-at-all-but-long-enough-to-pass-length-xx')).rejects.toThrow(/does not start with "sk-tg-"/);
  });

  it('revokes a key once and keeps it findable (so the gateway can say "revoked")', async () => {
    const store = make();
    const acct = await store.createAccount('Revoke');
    const { record, secret } = await store.createKey(acct.id);
    expect(await store.revokeKey(acct.id, record.id)).toBe(true);
    const revoked = await store.findKeyByHash(hashApiKey(secret));
    expect(revoked?.revokedAt).toEqual(expect.any(Number));
    expect(await store.revokeKey(acct.id, record.id)).toBe(true);
    expect((await store.getKey(acct.id, record.id))?.revokedAt).toBe(revoked?.revokedAt);
    expect(await store.revokeKey(acct.id, 'key_missing')).toBe(false);
  });

  it('sets and clears caps', async () => {
    const store = make();
    const acct = await store.createAccount('Caps');
    const { record } = await store.createKey(acct.id);
    expect(await store.setKeyCaps(acct.id, record.id, { lifetimeCap: 10, monthlyCap: 5 })).toBe(true);
    expect(await store.getKey(acct.id, record.id)).toMatchObject({ lifetimeCap: 10, monthlyCap: 5 });
    expect(await store.setKeyCaps(acct.id, record.id, { monthlyCap: 7 })).toBe(true);
    const k = await store.getKey(acct.id, record.id);
    expect(k?.lifetimeCap).toBeUndefined();
    expect(k?.monthlyCap).toBe(7);
    expect(await store.setKeyCaps(acct.id, record.id, {})).toBe(true);
    const cleared = await store.getKey(acct.id, record.id);
    expect(cleared?.lifetimeCap).toBeUndefined();
    expect(cleared?.monthlyCap).toBeUndefined();
    expect(await store.setKeyCaps(acct.id, 'key_missing', { lifetimeCap: 1 })).toBe(false);
    await expect(store.setKeyCaps(acct.id, record.id, { lifetimeCap: -1 })).rejects.toThrow(RangeError);
    await expect(store.setKeyCaps(acct.id, record.id, { monthlyCap: 1.5 })).rejects.toThrow(RangeError);
  });

  it("sets and clears a key's max cost per request by updateKey; a change naming only it keeps the caps and rate limits, one naming only a cap keeps it", async () => {
    const store = make();
    const acct = await store.createAccount('Ceiling');
    const limits = { requestsPerMinute: 60, concurrentRequests: 2 };
    const { record, secret } = await store.createKey(acct.id, { name: 'agent', monthlyCap: 9, lifetimeCap: 90, maxCostPerRequest: 50_000, rateLimits: limits });
    expect(record).toMatchObject({ monthlyCap: 9, maxCostPerRequest: 50_000 });
    expect(await store.findKeyByHash(hashApiKey(secret))).toMatchObject({ maxCostPerRequest: 50_000 });
    // Naming only the ceiling: the caps and the rate limits stay as they were.
    expect(await store.updateKey(acct.id, record.id, { maxCostPerRequest: 1 })).toBe(true);
    expect(await store.getKey(acct.id, record.id)).toMatchObject({ monthlyCap: 9, lifetimeCap: 90, maxCostPerRequest: 1, rateLimits: limits });
    expect(await store.findKeyByHash(hashApiKey(secret))).toMatchObject({ monthlyCap: 9, lifetimeCap: 90, maxCostPerRequest: 1, rateLimits: limits });
    // Naming only a cap (set or cleared), or only a limit: the ceiling stays.
    expect(await store.updateKey(acct.id, record.id, { monthlyCap: 7 })).toBe(true);
    expect(await store.updateKey(acct.id, record.id, { lifetimeCap: null, requestsPerMinute: 30 })).toBe(true);
    expect(await store.getKey(acct.id, record.id)).toMatchObject({ monthlyCap: 7, maxCostPerRequest: 1, rateLimits: { requestsPerMinute: 30, concurrentRequests: 2 } });
    // So does replacing the caps as a group.
    expect(await store.setKeyCaps(acct.id, record.id, {})).toBe(true);
    expect((await store.getKey(acct.id, record.id))?.maxCostPerRequest).toBe(1);
    // Several settings in one change, the ceiling cleared among them.
    expect(await store.updateKey(acct.id, record.id, { maxCostPerRequest: null, monthlyCap: 3 })).toBe(true);
    const cleared = await store.getKey(acct.id, record.id);
    expect(cleared?.maxCostPerRequest).toBeUndefined();
    expect(cleared).toMatchObject({ monthlyCap: 3, rateLimits: { requestsPerMinute: 30, concurrentRequests: 2 } });
    expect((await store.findKeyByHash(hashApiKey(secret)))?.maxCostPerRequest).toBeUndefined();
    expect((await store.listKeys(acct.id))[0]).not.toHaveProperty('maxCostPerRequest');
    expect(await store.updateKey(acct.id, 'key_missing', { maxCostPerRequest: 1 })).toBe(false);
    await expect(store.updateKey(acct.id, record.id, { maxCostPerRequest: -1 })).rejects.toThrow(/maxCostPerRequest/);
    await expect(store.updateKey(acct.id, record.id, { maxCostPerRequest: 0.5 })).rejects.toThrow(RangeError);
    await expect(store.createKey(acct.id, { maxCostPerRequest: -5 })).rejects.toThrow(RangeError);
  });
});

describe('Redis keeps only hashes of keys', () => {
  it('no stored key name or value contains the secret', async () => {
    const { accounts, ledger } = createRedisBackend({ redis: testRedis.redis, namespace, keyMarker: 'tg' });
    const acct = await accounts.createAccount('Hash only');
    const created = await accounts.createKey(acct.id, { lifetimeCap: 100, monthlyCap: 50 });
    const imported = generateApiKey('tg');
    await accounts.importKey(acct.id, imported);
    await ledger.credit(acct.id, 1000, 'topup-1');
    await ledger.reserve({ requestId: 'r1', accountId: acct.id, keyId: created.record.id, amount: 10, holdTtlMs: 60_000 });
    await ledger.settle({
      requestId: 'r1', accountId: acct.id, keyId: created.record.id, model: 'm',
      usage: { input: 1, output: 1, cachedInput: 0, reasoning: 0 }, cost: 5, status: 'completed', latencyMs: 1,
    });
    const { redis } = testRedis;
    const dump: string[] = [];
    for (const key of await redis.keys(`${namespace}:*`)) {
      dump.push(key);
      const type = await redis.type(key);
      if (type === 'string') dump.push((await redis.get(key)) ?? '');
      else if (type === 'hash') dump.push(JSON.stringify(await redis.hgetall(key)));
      else if (type === 'zset') dump.push(JSON.stringify(await redis.zrange(key, 0, -1, 'WITHSCORES')));
      else if (type === 'stream') dump.push(JSON.stringify(await redis.xrange(key, '-', '+')));
      else if (type === 'set') dump.push(JSON.stringify(await redis.smembers(key)));
      else throw new Error(`unexpected type ${type} for ${key}`);
    }
    const all = dump.join('\n');
    expect(all).toContain(hashApiKey(created.secret));
    expect(all).toContain(hashApiKey(imported));
    for (const secret of [created.secret, imported]) {
      const random = secret.slice(6);
      expect(all).not.toContain(random);
      // Not even a long fragment: the hint's 4+4 characters are all that may appear.
      for (let i = 0; i + 12 <= random.length; i++) expect(all).not.toContain(random.slice(i, i + 12));
    }
  });
});
