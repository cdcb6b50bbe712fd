// Rate limits on the record's durable path, over a real Redis and a real PostgreSQL (migration 023): a
// key's own limits and the account's default reach Redis with their versions, an older copy of the
// default arriving late does not bring it back, a push Redis refused is taken there by the sweeper, a
// wiped Redis gets both back from the record, and reconciliation repairs limits Redis holds wrong.
import { afterAll, describe, expect, it } from 'vitest';
import type { Account, RestorableAccountStore } from '../../src/accounts/account-store.js';
import { createRedisBackend } from '../../src/billing/backends.js';
import { redisKeys } from '../../src/billing/redis-keys.js';
import { recordedBackend } from '../../src/record/recorded-backend.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTestRedis } from '../helpers/test-redis.js';

const record = useTestDatabase('recrate');
const testRedis = useTestRedis('t-recrate');
let nsCounter = 0;
const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const c of closers) await c();
});

async function world(opts: { failAccountPushes?: number } = {}) {
  const namespace = `${testRedis.namespace}-${nsCounter++}`;
  const inner = createRedisBackend({ redis: testRedis.redis, namespace, keyMarker: 'tg' });
  let failures = opts.failAccountPushes ?? 0;
  // The real Redis store, whose account pushes fail while `failures` lasts (Redis refusing writes).
  const accounts = new Proxy(inner.accounts, {
    get(target, prop, receiver) {
      if (prop === 'restoreAccount') {
        return async (a: Account, version?: number) => {
          if (failures > 0 && a.rateLimits !== undefined) {
            failures--;
            throw new Error('READONLY You can\'t write against a read only replica.');
          }
          return target.restoreAccount(a, version);
        };
      }
      const v: unknown = Reflect.get(target, prop, receiver);
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  }) as RestorableAccountStore;
  const backend = recordedBackend({ accounts, ledger: inner.ledger }, record.db, 'tg', { keySweepMs: 0 });
  closers.push(() => backend.accounts.close());
  const acct = await backend.accounts.createAccount('limits');
  await backend.ledger.credit(acct.id, 1_000_000, `fund-${acct.id}`);
  const key = await backend.accounts.createKey(acct.id, { name: 'k', rateLimits: { requestsPerMinute: 7 } });
  const k = redisKeys(namespace);
  return { inner, backend, accountId: acct.id, keyId: key.record.id, namespace, keyHash: k.key(acct.id, key.record.id), accountHash: k.account(acct.id) };
}

describe('rate limits reach Redis from the record', () => {
  it("a key's own limits and the account's default are in the hot path's hashes the reserve script reads", async () => {
    const w = await world();
    expect(await testRedis.redis.hget(w.keyHash, 'rpm')).toBe('7');
    await w.backend.accounts.setKeyRateLimits(w.accountId, w.keyId, { tokensPerMinute: 5_000, concurrentRequests: 2 });
    expect(await testRedis.redis.hmget(w.keyHash, 'rpm', 'tpm', 'conc')).toEqual([null, '5000', '2']);
    await w.backend.accounts.setAccountRateLimits(w.accountId, { requestsPerMinute: 30 });
    expect(await testRedis.redis.hmget(w.accountHash, 'drpm', 'dtpm', 'dconc')).toEqual(['30', null, null]);
    // Read back from the record (PostgreSQL) as from the hot path.
    expect((await w.backend.accounts.listKeys(w.accountId))[0]?.rateLimits).toEqual({ tokensPerMinute: 5_000, concurrentRequests: 2 });
    expect((await w.backend.accounts.getAccount(w.accountId))?.rateLimits).toEqual({ requestsPerMinute: 30 });
    const row = await record.db.query<{ default_rpm_limit: unknown; limits_version: unknown; limits_hot_version: unknown }>(
      'SELECT default_rpm_limit, limits_version, limits_hot_version FROM accounts WHERE id = $1',
      [w.accountId],
    );
    const r = row.rows[0];
    expect([Number(r?.default_rpm_limit), Number(r?.limits_version), Number(r?.limits_hot_version)]).toEqual([30, 2, 2]);
  });

  it('a partial change of a key writes only what it names, in PostgreSQL and in Redis alike (issue 37, item 4)', async () => {
    const w = await world();
    await w.backend.accounts.setKeyCaps(w.accountId, w.keyId, { monthlyCap: 5_000_000, lifetimeCap: 9_000_000 });
    const version = async (): Promise<number> => Number((await record.db.query<{ version: unknown }>('SELECT version FROM api_keys WHERE id = $1', [w.keyId])).rows[0]?.version);
    const before = await version();
    expect(await w.backend.accounts.updateKey(w.accountId, w.keyId, { requestsPerMinute: 60, tokensPerMinute: 1_000 })).toBe(true);
    expect(await version()).toBe(before + 1);
    expect(await testRedis.redis.hmget(w.keyHash, 'rpm', 'tpm', 'conc', 'lifetimeCap', 'monthlyCap')).toEqual(['60', '1000', null, '9000000', '5000000']);
    expect(await w.backend.accounts.updateKey(w.accountId, w.keyId, { monthlyCap: null, tokensPerMinute: null })).toBe(true);
    expect(await testRedis.redis.hmget(w.keyHash, 'rpm', 'tpm', 'lifetimeCap', 'monthlyCap')).toEqual(['60', null, '9000000', null]);
    const row = (await record.db.query<Record<string, unknown>>('SELECT lifetime_cap, monthly_cap, rpm_limit, tpm_limit FROM api_keys WHERE id = $1', [w.keyId])).rows[0];
    expect(row).toEqual({ lifetime_cap: 9_000_000, monthly_cap: null, rpm_limit: 60, tpm_limit: null });
    // The Redis store on its own (a gateway without the record) takes the same change the same way.
    expect(await w.inner.accounts.updateKey(w.accountId, w.keyId, { concurrentRequests: 2 })).toBe(true);
    expect(await w.inner.accounts.getKey(w.accountId, w.keyId)).toMatchObject({ lifetimeCap: 9_000_000, rateLimits: { requestsPerMinute: 60, concurrentRequests: 2 } });
    // Nothing named: nothing written; an unknown key or a bad value: false or refused.
    expect(await w.backend.accounts.updateKey(w.accountId, w.keyId, {})).toBe(true);
    expect(await w.backend.accounts.updateKey(w.accountId, 'key_nope', { requestsPerMinute: 1 })).toBe(false);
    await expect(w.backend.accounts.updateKey(w.accountId, w.keyId, { requestsPerMinute: 0 })).rejects.toThrow(/requestsPerMinute/);
  });

  it("the cost ceiling per request is one more setting of the same single write: named with others, alone, or left out and kept", async () => {
    const w = await world();
    await w.backend.accounts.setKeyCaps(w.accountId, w.keyId, { monthlyCap: 5_000_000 });
    const version = async (): Promise<number> => Number((await record.db.query<{ version: unknown }>('SELECT version FROM api_keys WHERE id = $1', [w.keyId])).rows[0]?.version);
    const columns = async (): Promise<Record<string, unknown> | undefined> =>
      (await record.db.query<Record<string, unknown>>('SELECT monthly_cap, max_cost_per_request, rpm_limit FROM api_keys WHERE id = $1', [w.keyId])).rows[0];
    const before = await version();
    // The ceiling with a cap and a limit: one new version of the key, all three in the record and in Redis.
    expect(await w.backend.accounts.updateKey(w.accountId, w.keyId, { maxCostPerRequest: 40_000, monthlyCap: 6_000_000, requestsPerMinute: 9 })).toBe(true);
    expect(await version()).toBe(before + 1);
    expect(await columns()).toEqual({ monthly_cap: 6_000_000, max_cost_per_request: 40_000, rpm_limit: 9 });
    expect(await testRedis.redis.hmget(w.keyHash, 'maxCost', 'monthlyCap', 'rpm')).toEqual(['40000', '6000000', '9']);
    // A cap alone keeps the ceiling; the ceiling alone keeps the cap and the limit.
    expect(await w.backend.accounts.updateKey(w.accountId, w.keyId, { monthlyCap: null })).toBe(true);
    expect(await w.backend.accounts.updateKey(w.accountId, w.keyId, { maxCostPerRequest: 30_000 })).toBe(true);
    expect(await version()).toBe(before + 3);
    expect(await columns()).toEqual({ monthly_cap: null, max_cost_per_request: 30_000, rpm_limit: 9 });
    expect(await testRedis.redis.hmget(w.keyHash, 'maxCost', 'monthlyCap', 'rpm')).toEqual(['30000', null, '9']);
    // Cleared by null, in both.
    expect(await w.backend.accounts.updateKey(w.accountId, w.keyId, { maxCostPerRequest: null })).toBe(true);
    expect(await columns()).toEqual({ monthly_cap: null, max_cost_per_request: null, rpm_limit: 9 });
    expect(await testRedis.redis.hmget(w.keyHash, 'maxCost', 'rpm')).toEqual([null, '9']);
    // The Redis store on its own writes the same field.
    expect(await w.inner.accounts.updateKey(w.accountId, w.keyId, { maxCostPerRequest: 7 })).toBe(true);
    expect(await w.inner.accounts.getKey(w.accountId, w.keyId)).toMatchObject({ maxCostPerRequest: 7, rateLimits: { requestsPerMinute: 9 } });
  });

  it("an older copy of the account's default arriving after a newer one leaves the newer in Redis", async () => {
    const w = await world();
    await w.backend.accounts.setAccountRateLimits(w.accountId, { requestsPerMinute: 10 }); // version 2
    await w.backend.accounts.setAccountRateLimits(w.accountId, { requestsPerMinute: 20 }); // version 3
    const account = await w.inner.accounts.getAccount(w.accountId);
    if (account === undefined) throw new Error('no account');
    await w.inner.accounts.restoreAccount({ ...account, rateLimits: { requestsPerMinute: 10 } }, 2);
    expect(await testRedis.redis.hget(w.accountHash, 'drpm')).toBe('20');
    // Without a version (a store used without the record) the write is taken as it is.
    await w.inner.accounts.restoreAccount({ ...account, rateLimits: { requestsPerMinute: 11 } });
    expect(await testRedis.redis.hget(w.accountHash, 'drpm')).toBe('11');
  });

  it('a default Redis refused is committed in the record and pushed by the sweeper', async () => {
    const w = await world({ failAccountPushes: 1 });
    await w.backend.accounts.setAccountRateLimits(w.accountId, { concurrentRequests: 3 });
    expect(await testRedis.redis.hget(w.accountHash, 'dconc')).toBeNull();
    expect(await w.backend.accounts.sweepKeys()).toBeGreaterThanOrEqual(1);
    expect(await testRedis.redis.hget(w.accountHash, 'dconc')).toBe('3');
  });

  it('a wiped Redis gets the limits back from the record with the account', async () => {
    const w = await world();
    await w.backend.accounts.setAccountRateLimits(w.accountId, { tokensPerMinute: 9_000 });
    const keys = await testRedis.redis.keys(`${w.namespace}:*`);
    await testRedis.redis.del(...keys);
    await w.backend.accounts.restoreAccountKeys(w.accountId);
    expect(await testRedis.redis.hget(w.keyHash, 'rpm')).toBe('7');
    expect(await testRedis.redis.hget(w.accountHash, 'dtpm')).toBe('9000');
  });

  it("reconciliation finds limits Redis lost or holds wrong, and repairs them from the record", async () => {
    const w = await world();
    await w.backend.accounts.setAccountRateLimits(w.accountId, { concurrentRequests: 4 });
    await testRedis.redis.hdel(w.keyHash, 'rpm');
    await testRedis.redis.hset(w.accountHash, 'dconc', '40', 'dtpm', '5');
    const found = await w.backend.accounts.reconcileKeys(w.accountId);
    expect(found.map((d) => `${d.keyId} ${d.field} ${d.expected}->${d.actual}`).sort()).toEqual(
      [` account_concurrency_limit 4->40`, ` account_tpm_limit -1->5`, `${w.keyId} key_rpm_limit 7->-1`].sort(),
    );
    expect(await testRedis.redis.hget(w.keyHash, 'rpm')).toBe('7');
    expect(await testRedis.redis.hmget(w.accountHash, 'dconc', 'dtpm')).toEqual(['4', null]);
    expect(await w.backend.accounts.reconcileKeys(w.accountId)).toEqual([]);
  });
});
