// Holds in Redis are timed by Redis, and a hold is never without its reaper-index entry:
//   - a pod whose clock is off (by an hour, by a month) still places holds with deadlines and billing
//     months from Redis's clock (on 7339c82 they came from the pod: skew past the margin reaped live
//     holds, and the month could be the wrong one);
//   - when the command after the reserve script is lost, the hold is still reaped (on 7339c82 the
//     index entry was a second command: if it failed, the hold was never reaped).
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { createRedisBackend } from '../../src/billing/backends.js';
import { utcMonth } from '../../src/billing/month.js';
import { useTestRedis } from '../helpers/test-redis.js';

const t = useTestRedis('t-ledger-clock');
let n = 0;

async function redisNow(redis: Redis): Promise<number> {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

describe('holds timed by Redis', () => {
  for (const [what, skewMs] of [['an hour behind', -3_600_000], ['forty days ahead', 40 * 86_400_000]] as const) {
    it(`a pod clock ${what} still gets Redis's deadline and month`, async () => {
      const namespace = `${t.namespace}-${++n}`;
      const backend = createRedisBackend({ redis: t.redis, namespace, now: () => Date.now() + skewMs });
      const acct = await backend.accounts.createAccount('clock');
      const { record } = await backend.accounts.createKey(acct.id);
      await backend.ledger.credit(acct.id, 1_000_000, 'top');
      const before = await redisNow(t.redis);
      expect((await backend.ledger.reserve({ requestId: 'r1', accountId: acct.id, keyId: record.id, amount: 10, holdTtlMs: 60_000 })).admitted).toBe(true);
      const after = await redisNow(t.redis);
      const [deadline, month] = await t.redis.hmget(`${namespace}:{${acct.id}}:hold:r1`, 'deadline', 'month');
      expect(Number(deadline)).toBeGreaterThanOrEqual(before + 60_000);
      expect(Number(deadline)).toBeLessThanOrEqual(after + 60_000);
      expect(month).toBe(utcMonth(after));
      // The reaper, on the same skewed pod, does not return the live hold early.
      expect(await backend.ledger.reapExpired()).toBe(0);
      expect((await backend.ledger.audit(acct.id)).holdsOutstanding).toBe(1);
    });
  }
});

describe('a hold and its reaper-index entry', () => {
  it('are written together: with every command after the script lost, the hold is still reaped', async () => {
    const namespace = `${t.namespace}-${++n}`;
    // A connection on which only scripts get through: any separate index command after the reserve is lost.
    const lossy = new Proxy(t.redis, {
      get(obj, prop) {
        const v: unknown = Reflect.get(obj, prop, obj);
        if (typeof v !== 'function') return v;
        if (prop === 'zadd' || prop === 'sadd') return () => Promise.reject(new Error('connection lost'));
        return (v as (...a: unknown[]) => unknown).bind(obj);
      },
    });
    const setup = createRedisBackend({ redis: t.redis, namespace });
    const acct = await setup.accounts.createAccount('lossy');
    const { record } = await setup.accounts.createKey(acct.id);
    await setup.ledger.credit(acct.id, 1_000_000, 'top');
    const placing = createRedisBackend({ redis: lossy, namespace });
    const t0 = Date.UTC(2026, 3, 1);
    // The reservation itself may report the lost command; the hold is placed either way.
    await placing.ledger.reserve({ requestId: 'r1', accountId: acct.id, keyId: record.id, amount: 500, holdTtlMs: 1000, now: t0 }).catch(() => undefined);
    expect((await placing.ledger.audit(acct.id)).holdsOutstanding).toBe(1);
    // The reaper's full sweep (every pass here; every 60th by default) finds it once it is due.
    const reaper = createRedisBackend({ redis: t.redis, namespace, fullSweepEvery: 1 });
    expect(await reaper.ledger.reapExpired(t0 + 999)).toBe(0);
    expect(await reaper.ledger.reapExpired(t0 + 1000)).toBe(1);
    const audit = await reaper.ledger.audit(acct.id);
    expect(audit.holdsOutstanding).toBe(0);
    expect((await reaper.ledger.balance(acct.id)).held).toBe(0);
  });
});
