// Concurrency and cluster-readiness of the Redis ledger: many connections racing on one key's caps,
// every script touching one hash tag only, and recovery when Redis has lost its script cache.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { KeyCaps } from '../../src/accounts/account-store.js';
import { slotOfTag } from '../../src/billing/cluster-slots.js';
import { createMemoryBackend, createRedisBackend, type Backend } from '../../src/billing/backends.js';
import type { SettlementRequest } from '../../src/billing/ledger.js';
import { startRedisServer } from '../helpers/redis-server.js';

const namespace = `t-ledger-conc-${randomBytes(4).toString('hex')}`;
const CONNECTIONS = 8;
let conns: Redis[] = [];

beforeAll(() => {
  conns = Array.from({ length: CONNECTIONS }, () => new Redis(inject('redisUrl')));
});
afterAll(async () => {
  const c = conns[0];
  if (c) {
    const keys = await c.keys(`${namespace}*`);
    for (let i = 0; i < keys.length; i += 500) await c.del(...keys.slice(i, i + 500));
  }
  await Promise.all(conns.map((r) => r.quit()));
});

const AMOUNT = 1000;
const N = 37;
const RACERS = 500;

const limits: Array<[string, KeyCaps, number, string]> = [
  ['lifetime cap', { lifetimeCap: N * AMOUNT + AMOUNT - 1 }, 10_000_000, 'key_lifetime_cap_reached'],
  ['monthly cap', { monthlyCap: N * AMOUNT + AMOUNT - 1 }, 10_000_000, 'key_monthly_cap_reached'],
  ['balance', {}, N * AMOUNT + AMOUNT - 1, 'insufficient_balance'],
];

describe.each(limits)('%s: 500 concurrent reserves admit exactly N', (_name, caps, balance, reason) => {
  it('on Redis, over several connections', async () => {
    const ns = `${namespace}-${randomBytes(3).toString('hex')}`;
    const backends: Backend[] = conns.map((redis) => createRedisBackend({ redis, namespace: ns }));
    const first = backends[0] as Backend;
    const acct = await first.accounts.createAccount('race');
    const { record } = await first.accounts.createKey(acct.id, caps);
    await first.ledger.credit(acct.id, balance, 'topup');
    const outcomes = await Promise.all(
      Array.from({ length: RACERS }, (_, i) =>
        (backends[i % CONNECTIONS] as Backend).ledger.reserve({
          requestId: `r${i}`, accountId: acct.id, keyId: record.id, amount: AMOUNT, holdTtlMs: 60_000,
        }),
      ),
    );
    const admitted = outcomes.filter((o) => o.admitted).length;
    expect(admitted).toBe(N);
    for (const o of outcomes) if (!o.admitted) expect(o).toMatchObject({ reason, available: AMOUNT - 1 });
    expect((await first.ledger.balance(acct.id)).held).toBe(N * AMOUNT);

    // And every admitted request settles exactly once, however many times it is retried concurrently.
    const admittedIds = outcomes.flatMap((o, i) => (o.admitted ? [`r${i}`] : []));
    const settle = (requestId: string, b: Backend): Promise<{ duplicate: boolean; charged: number }> => {
      const req: SettlementRequest = {
        requestId, accountId: acct.id, keyId: record.id, model: 'm',
        usage: { input: 1, output: 1, cachedInput: 0, reasoning: 0 }, cost: 600, status: 'completed', latencyMs: 1,
      };
      return b.ledger.settle(req);
    };
    const settled = await Promise.all(admittedIds.flatMap((id) => backends.map((b) => settle(id, b))));
    expect(settled.filter((s) => !s.duplicate)).toHaveLength(N);
    expect(settled.filter((s) => !s.duplicate).every((s) => s.charged === 600)).toBe(true);
    expect(await first.ledger.balance(acct.id)).toEqual({ balance: balance - N * 600, held: 0 });
    expect((await first.ledger.audit(acct.id)).difference).toBe(0);
  });

  it('in memory', async () => {
    const { accounts, ledger } = createMemoryBackend();
    const acct = await accounts.createAccount('race');
    const { record } = await accounts.createKey(acct.id, caps);
    await ledger.credit(acct.id, balance, 'topup');
    const outcomes = await Promise.all(
      Array.from({ length: RACERS }, (_, i) =>
        ledger.reserve({ requestId: `r${i}`, accountId: acct.id, keyId: record.id, amount: AMOUNT, holdTtlMs: 60_000 }),
      ),
    );
    expect(outcomes.filter((o) => o.admitted)).toHaveLength(N);
  });
});

/** Accounts in the reaper indexes of a namespace (one index per cluster slot). */
async function indexed(redis: Redis, ns: string): Promise<number> {
  let n = 0;
  for (const key of await redis.keys(`${ns}:{*}:reap-index`)) n += await redis.zcard(key);
  return n;
}

describe('reaper index', () => {
  it('finds expired holds across accounts and never loses an account that still holds money', async () => {
    const ns = `${namespace}-reap`;
    const redis = conns[0] as Redis;
    const backends = conns.map((r) => createRedisBackend({ redis: r, namespace: ns }));
    const { accounts, ledger } = backends[0] as Backend;
    const t0 = Date.UTC(2026, 5, 1);
    const fixtures: Array<{ accountId: string; keyId: string }> = [];
    for (let i = 0; i < 20; i++) {
      const acct = await accounts.createAccount(`a${i}`);
      const { record } = await accounts.createKey(acct.id);
      await ledger.credit(acct.id, 100_000, 'topup');
      fixtures.push({ accountId: acct.id, keyId: record.id });
    }
    // Holds with deadlines t0+1000 .. t0+20000, one per account.
    await Promise.all(fixtures.map((f, i) => ledger.reserve({ ...f, requestId: 'h', amount: 10, holdTtlMs: (i + 1) * 1000, now: t0 })));
    expect(await ledger.reapExpired(t0 + 5000)).toBe(5);
    expect(await ledger.reapExpired(t0 + 5000)).toBe(0);
    expect(await indexed(redis, ns)).toBe(15);
    // Reaps racing reserves on the same accounts, from other connections.
    let n = 0;
    for (let round = 0; round < 30; round++) {
      const now = t0 + 5000 + round * 10;
      await Promise.all([
        ...fixtures.map((f, i) =>
          (backends[(i + round) % CONNECTIONS] as Backend).ledger.reserve({ ...f, requestId: `x${round}`, amount: 1, holdTtlMs: 5, now }),
        ),
        (backends[round % CONNECTIONS] as Backend).ledger.reapExpired(now).then((k) => {
          n += k;
        }),
      ]);
    }
    n += await ledger.reapExpired(t0 + 100_000);
    expect(n).toBe(15 + 30 * fixtures.length);
    for (const f of fixtures) expect((await ledger.audit(f.accountId)).holdsOutstanding).toBe(0);
    expect(await indexed(redis, ns)).toBe(0);
  });

  it('a hold placed while the reaper re-files its account is still reaped later', async () => {
    // Force the worst interleaving: the reaper's script has found no hold left, and before it takes the
    // account out of the index a reserve (on another connection) adds a hold and its own index entry.
    const ns = `${namespace}-reap-race`;
    const other = createRedisBackend({ redis: conns[1] as Redis, namespace: ns });
    const target = conns[0] as Redis;
    let beforeRefile: (() => Promise<void>) | undefined;
    const hooked = new Proxy(target, {
      get(obj, prop) {
        const v: unknown = Reflect.get(obj, prop, obj);
        if (typeof v !== 'function') return v;
        if (prop === 'zrem' || prop === 'zadd') {
          return async (...args: unknown[]) => {
            if (String(args[0]).startsWith(`${ns}:{`) && String(args[0]).endsWith('}:reap-index') && beforeRefile) {
              const hook = beforeRefile;
              beforeRefile = undefined;
              await hook();
            }
            return (v as (...a: unknown[]) => unknown).apply(obj, args);
          };
        }
        return (v as (...a: unknown[]) => unknown).bind(obj);
      },
    });
    const reaperSide = createRedisBackend({ redis: hooked, namespace: ns });
    const acct = await other.accounts.createAccount('race');
    const { record } = await other.accounts.createKey(acct.id);
    await other.ledger.credit(acct.id, 1000, 'topup');
    const t0 = Date.UTC(2026, 6, 1);
    const f = { accountId: acct.id, keyId: record.id };
    await other.ledger.reserve({ ...f, requestId: 'old', amount: 1, holdTtlMs: 1, now: t0 });
    beforeRefile = async () => {
      expect(await other.ledger.reserve({ ...f, requestId: 'new', amount: 1, holdTtlMs: 1000, now: t0 + 1 })).toEqual({ admitted: true });
    };
    expect(await reaperSide.ledger.reapExpired(t0 + 1)).toBe(1);
    expect(beforeRefile).toBeUndefined();
    expect(await reaperSide.ledger.reapExpired(t0 + 2000)).toBe(1);
    expect((await other.ledger.audit(acct.id)).holdsOutstanding).toBe(0);
  });
});

describe('cluster readiness', () => {
  it('every key of every script call carries the account hash tag', async () => {
    const ns = `${namespace}-tags`;
    const redis = conns[0] as Redis;
    const monitor = await new Redis(inject('redisUrl')).monitor();
    const calls: string[][] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      const cmd = args[0]?.toLowerCase();
      if ((cmd === 'evalsha' || cmd === 'eval') && args.slice(3).some((a) => a.startsWith(`${ns}:`))) calls.push(args);
    });
    try {
      const { accounts, ledger } = createRedisBackend({ redis, namespace: ns, usageMaxRecords: 2 });
      const acct = await accounts.createAccount('tags');
      const { record } = await accounts.createKey(acct.id, { lifetimeCap: 10_000, monthlyCap: 5000 });
      await ledger.credit(acct.id, 10_000, 'topup');
      const t0 = Date.now();
      const settle = (requestId: string, now: number) =>
        ledger.settle({
          requestId, accountId: acct.id, keyId: record.id, model: 'm',
          usage: { input: 1, output: 1, cachedInput: 0, reasoning: 0 }, cost: 100, status: 'completed', latencyMs: 1, now,
        });
      for (let i = 0; i < 4; i++) {
        await ledger.reserve({ requestId: `a${i}`, accountId: acct.id, keyId: record.id, amount: 500, holdTtlMs: 60_000, now: t0 });
        await settle(`a${i}`, t0);
      }
      await ledger.reserve({ requestId: 'late', accountId: acct.id, keyId: record.id, amount: 500, holdTtlMs: 10, now: t0 });
      expect(await ledger.reapExpired(t0 + 10)).toBe(1);
      expect((await settle('late', t0 + 20)).late).toBe(true);
      expect((await ledger.refund(acct.id, 'a0')).refunded).toBe(100);
      expect((await ledger.audit(acct.id)).difference).toBe(0);
      // MONITOR output trails the replies slightly.
      await new Promise((r) => setTimeout(r, 200));
    } finally {
      monitor.disconnect();
    }
    const shas = new Set<string>();
    for (const args of calls) {
      shas.add(args[1] ?? '');
      const numKeys = Number(args[2]);
      const keys = args.slice(3, 3 + numKeys);
      expect(keys.length).toBeGreaterThan(0);
      // One slot per script: the account's hash tag, or (the reaper index) a tag of the same slot.
      const slots = new Set(keys.map((k) => slotOfTag(/\{([^}]+)\}/.exec(k)?.[1] ?? k)));
      expect(slots.size, `one slot in ${keys.join(' ')}`).toBe(1);
      // Each script is about one account: its tag is on every key but the reaper index.
      expect(keys.filter((k) => !k.endsWith(':reap-index')).every((k) => k.includes('{acct_'))).toBe(true);
    }
    // reserve, settle, reap, credit, refund, audit: all six were seen.
    expect(shas.size).toBe(6);
  });
});

describe('script cache loss', () => {
  it('reloads scripts when Redis answers NOSCRIPT (reserve pipeline and plain calls)', async () => {
    const server = await startRedisServer();
    const redis = new Redis(server.url);
    try {
      const { accounts, ledger } = createRedisBackend({ redis, namespace: 'noscript' });
      const acct = await accounts.createAccount('n');
      const { record } = await accounts.createKey(acct.id);
      await redis.script('FLUSH');
      expect(await ledger.credit(acct.id, 1000, 'topup')).toBe(true);
      await redis.script('FLUSH');
      expect(await ledger.reserve({ requestId: 'r', accountId: acct.id, keyId: record.id, amount: 400, holdTtlMs: 60_000 })).toEqual({ admitted: true });
      await redis.script('FLUSH');
      const s = await ledger.settle({
        requestId: 'r', accountId: acct.id, keyId: record.id, model: 'm',
        usage: { input: 1, output: 1, cachedInput: 0, reasoning: 0 }, cost: 300, status: 'completed', latencyMs: 1,
      });
      expect(s).toMatchObject({ charged: 300, released: 100, duplicate: false, late: false });
      expect(await ledger.balance(acct.id)).toEqual({ balance: 700, held: 0 });
    } finally {
      await redis.quit();
      await server.stop();
    }
  });
});

describe('one idempotency key, many concurrent credits of two amounts', () => {
  it('on Redis, over several connections: exactly one applies; the same amount is a no-op, the other a conflict', async () => {
    const ns = `${namespace}-${randomBytes(3).toString('hex')}`;
    const backends: Backend[] = conns.map((redis) => createRedisBackend({ redis, namespace: ns }));
    const first = backends[0] as Backend;
    const acct = await first.accounts.createAccount('credit-race');
    const amounts = [5_000_000, 7_000_000];
    const outcomes = await Promise.allSettled(
      Array.from({ length: 200 }, (_, i) => (backends[i % CONNECTIONS] as Backend).ledger.credit(acct.id, amounts[i % 2] as number, 'pay_same')),
    );
    const applied = outcomes.flatMap((o, i) => (o.status === 'fulfilled' && o.value ? [amounts[i % 2] as number] : []));
    expect(applied).toHaveLength(1);
    const winner = applied[0] as number;
    outcomes.forEach((o, i) => {
      if (amounts[i % 2] === winner) expect(o.status === 'fulfilled').toBe(true);
      else expect(o.status === 'rejected' && /different amount/.test(String(o.reason))).toBe(true);
    });
    expect(await first.ledger.balance(acct.id)).toEqual({ balance: winner, held: 0 });
    expect((await first.ledger.audit(acct.id)).credited).toBe(winner);
  });
});
