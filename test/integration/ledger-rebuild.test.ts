// A Redis hot path that loses its data (FLUSHALL, a restart without persistence, a failover to an
// empty replica) while PostgreSQL keeps the record, with the production composition: the record's
// ledger (seeding, credits first to PostgreSQL) under the journal. Real Redis, real PostgreSQL.
//   - Property: random reserves, settlements, credits (repeated keys included), journal flushes and
//     catch-ups, and wipes at any point, in either order against the journal's commit. Once caught up,
//     every applied settlement is in PostgreSQL once, Redis's balance and each key's lifetime and month
//     spend equal PostgreSQL's to the micro-dollar, the Redis audit and reconciliation show no
//     difference, and no key's recorded spend is past its cap.
//   - The same with partial losses: Redis put back to an earlier point of its own (every key of the
//     namespace dumped there and restored), its generation kept, as a restart from an older AOF or RDB
//     or a failover to a lagging replica leaves it.
//   - The cases the property relies on, one by one: a wiped account is refused until seeded; a hold the
//     wipe took is charged when its request settles; a settlement applied before the wipe and committed
//     after the seed is added once; a credit committed before the seed is not added twice.
//   - What happens while a reload is between its read of the record and its load into Redis, staged in
//     that order: another gateway commits and trims a settlement of the wiped copy; this gateway commits
//     a credit; the account is loaded, used and wiped again. Each is counted once.
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createRedisBackend } from '../../src/billing/backends.js';
import { AccountNotSeededError, isSeededLedger, type Ledger } from '../../src/billing/ledger.js';
import { redisKeys } from '../../src/billing/redis-keys.js';
import { RedisJournalStream } from '../../src/record/redis-journal-stream.js';
import { JournalWriter } from '../../src/record/journal-writer.js';
import { JournaledLedger } from '../../src/record/journaled-ledger.js';
import { reconcile } from '../../src/record/reconcile.js';
import type { Database } from '../../src/record/database.js';
import { reconcileSources } from '../../src/record/reconcile-job.js';
import { recordedBackend } from '../../src/record/recorded-backend.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTestRedis } from '../helpers/test-redis.js';

const testRedis = useTestRedis('t-rebuild');
const testDb = useTestDatabase('rebuild');
const LIFETIME_CAP = 2_500;

let worldNo = 0;

/**
 * The record as one gateway reaches it, where `next(fn)` has `fn` run once, right after the gateway's
 * next read of an account for a reload (the statement that takes the record's snapshot) and before the
 * reload goes on to Redis: what `fn` does happens while that reload is on its way.
 */
function pausingReloads(db: Database): { db: Database; next(fn: () => Promise<void>): void } {
  let between: (() => Promise<void>) | undefined;
  return {
    db: {
      kind: db.kind,
      async query<R>(text: string, params?: Parameters<Database['query']>[1], opts?: Parameters<Database['query']>[2]) {
        const r = await db.query<R>(text, params, opts);
        const fn = between;
        if (fn !== undefined && text.includes('pg_current_snapshot()')) {
          between = undefined;
          await fn();
        }
        return r;
      },
      exec: (script) => db.exec(script),
      transaction: (fn) => db.transaction(fn),
      close: () => db.close(),
    },
    next(fn) {
      between = fn;
    },
  };
}

/** The production composition over a namespace of the test Redis; the test drives every timer. */
async function world(opts: { windowMs?: number; db?: Database } = {}) {
  const namespace = `${testRedis.namespace}-${++worldNo}`;
  const hot = createRedisBackend({ redis: testRedis.redis, namespace });
  const backend = recordedBackend(hot, opts.db ?? testDb.db, 'tg', { rebuildWindowMs: opts.windowMs ?? 0 });
  const keys = redisKeys(namespace);
  const stream = new RedisJournalStream(testRedis.redis, keys);
  const writer = new JournalWriter({ db: testDb.db, stream, maxLagMs: 600_000, intervalMs: 1e9, sweepIntervalMs: 0, trimIntervalMs: 1e9, trimAfterCommit: false });
  const ledger = new JournaledLedger(backend.ledger, writer);
  const account = await backend.accounts.createAccount(`rebuild ${worldNo}`);
  const capped = (await backend.accounts.createKey(account.id, { name: 'capped', lifetimeCap: LIFETIME_CAP })).record.id;
  const open = (await backend.accounts.createKey(account.id, { name: 'open' })).record.id;
  await backend.ledger.credit(account.id, 5_000, `start-${account.id}`);
  /** Everything of this namespace goes, as FLUSHALL would take it (the test Redis is shared). */
  const wipe = async (): Promise<void> => {
    const found = await testRedis.redis.keys(`${namespace}:*`);
    for (let i = 0; i < found.length; i += 500) await testRedis.redis.del(...found.slice(i, i + 500));
  };
  const catchUp = async (): Promise<void> => {
    await writer.flush();
    await writer.trim();
  };
  /** Every key of the namespace as it is now; the function puts them back, dropping what came since. */
  const point = async (): Promise<() => Promise<void>> => {
    const names = await testRedis.redis.keys(`${namespace}:*`);
    const saved = await Promise.all(names.map(async (n) => ({ n, ttl: await testRedis.redis.pttl(n), data: await testRedis.redis.dumpBuffer(n) })));
    return async () => {
      const now = await testRedis.redis.keys(`${namespace}:*`);
      for (let i = 0; i < now.length; i += 500) await testRedis.redis.del(...now.slice(i, i + 500));
      for (const v of saved) if (v.data !== null) await testRedis.redis.restore(v.n, v.ttl > 0 ? v.ttl : 0, v.data);
    };
  };
  return { point, hot, backend, recorded: backend.ledger, writer, ledger, accountId: account.id, keyIds: [capped, open], wipe, catchUp, stream, keys, namespace };
}

type World = Awaited<ReturnType<typeof world>>;

/** The hot path agrees with the record, to the micro-dollar, for the account and both keys. */
async function expectHotEqualsRecord(w: World): Promise<{ balance: number }> {
  await w.recorded.seed(w.accountId);
  const totals = await testDb.db.query<{ balance: number }>('SELECT balance FROM account_totals WHERE account_id = $1', [w.accountId]);
  const balance = totals.rows[0]?.balance ?? 0;
  expect((await w.hot.ledger.balance(w.accountId)).balance, 'Redis balance = PostgreSQL balance').toBe(balance);
  for (const keyId of w.keyIds) {
    const spend = await w.hot.ledger.keySpend(w.accountId, keyId);
    const life = await testDb.db.query<{ lifetime_spent: number }>('SELECT lifetime_spent FROM api_keys WHERE id = $1', [keyId]);
    expect(spend.lifetimeSpent, 'key lifetime spend').toBe(life.rows[0]?.lifetime_spent);
    const month = await testDb.db.query<{ spent: number }>('SELECT COALESCE(sum(spent), 0)::bigint AS spent FROM key_month_spend WHERE key_id = $1', [keyId]);
    expect(spend.monthSpent, 'key month spend').toBe(month.rows[0]?.spent);
  }
  expect((await w.hot.ledger.audit(w.accountId)).difference, 'Redis audit').toBe(0);
  const report = await reconcile(reconcileSources(testDb.db, w.backend, w.stream, w.writer), [w.accountId]);
  expect(report.differences).toEqual([]);
  return { balance };
}

const usage = (cost: number) => ({ usage: { input: cost, output: 1, cachedInput: 0, reasoning: 0 }, cost, status: 'completed' as const, latencyMs: 1, model: 'm' });

async function reserveAndSettle(ledger: Ledger, w: World, rid: string, keyId: string, amount: number, cost: number) {
  const r = await ledger.reserve({ requestId: rid, accountId: w.accountId, keyId, amount, holdTtlMs: 60_000 });
  if (!r.admitted) return undefined;
  return ledger.settle({ requestId: rid, accountId: w.accountId, keyId, ...usage(cost) });
}

type Op =
  | { t: 'reserve'; key: number; amount: number }
  | { t: 'settle'; req: number; cost: number }
  | { t: 'credit'; amount: number; key: number }
  | { t: 'flush' }
  | { t: 'trim' }
  | { t: 'wipe'; commitFirst: boolean }
  | { t: 'point' }
  | { t: 'rollback' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ t: fc.constant('reserve' as const), key: fc.nat(1), amount: fc.integer({ min: 0, max: 900 }) }) },
  { weight: 5, arbitrary: fc.record({ t: fc.constant('settle' as const), req: fc.nat(), cost: fc.nat(1200) }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('credit' as const), amount: fc.integer({ min: 1, max: 2000 }), key: fc.nat(3) }) },
  { weight: 2, arbitrary: fc.constant({ t: 'flush' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'trim' as const }) },
  { weight: 1, arbitrary: fc.record({ t: fc.constant('wipe' as const), commitFirst: fc.boolean() }) },
  { weight: 2, arbitrary: fc.constant({ t: 'point' as const }) },
  { weight: 2, arbitrary: fc.constant({ t: 'rollback' as const }) },
);

describe('Redis wiped under a ledger seeded from the record', () => {
  it('property: once caught up, the hot path equals the record, every settlement once, no cap passed', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 40 }), async (ops) => {
        const w = await world();
        const reqs: { rid: string; keyId: string; amount: number }[] = [];
        const applied = new Map<string, number>();
        let rollback: (() => Promise<void>) | undefined;
        for (const op of ops) {
          if (op.t === 'reserve') {
            const rid = `req_${worldNo}_${reqs.length}`;
            const keyId = w.keyIds[op.key] ?? '';
            const r = await w.ledger.reserve({ requestId: rid, accountId: w.accountId, keyId, amount: op.amount, holdTtlMs: 60_000, model: 'm' });
            // A wipe never makes a key unknown: the reload puts the account's keys back with its money.
            if (!r.admitted) expect(r.reason).not.toBe('unknown_key');
            if (r.admitted) reqs.push({ rid, keyId, amount: op.amount });
          } else if (op.t === 'settle') {
            const r = reqs[op.req % Math.max(1, reqs.length)];
            if (r === undefined) continue;
            const o = await w.ledger.settle({ requestId: r.rid, accountId: w.accountId, keyId: r.keyId, ...usage(op.cost) });
            // The first settlement of an admitted request is never a duplicate, whatever Redis lost.
            if (!applied.has(r.rid)) expect(o.duplicate, 'a first settlement taken as a duplicate').toBe(false);
            if (!o.duplicate) {
              expect(applied.has(r.rid), 'settled twice').toBe(false);
              expect(o.charged).toBeLessThanOrEqual(Math.min(op.cost, r.amount));
              applied.set(r.rid, o.charged);
            }
          } else if (op.t === 'credit') {
            // Keys repeat on purpose: a repeat (before or after a wipe) credits nothing.
            await w.ledger.credit(w.accountId, 1000 + op.key, `credit-${w.accountId}-${op.key}`);
          } else if (op.t === 'flush') {
            await w.writer.flush();
          } else if (op.t === 'trim') {
            await w.writer.trim();
          } else if (op.t === 'point') {
            rollback = await w.point();
          } else if (op.t === 'rollback') {
            // Redis goes back to the point, generation and all; what came since is lost to it.
            await rollback?.();
            rollback = undefined;
          } else {
            // The journal's commit lands before the wipe, or after the reload's snapshot was read: both
            // within the rebuild window, as the gateways' writers commit within it.
            if (op.commitFirst) await w.writer.flush();
            await w.wipe();
            await w.recorded.seed(w.accountId);
            await w.catchUp();
          }
        }
        await w.catchUp();
        // A loss no call has met since is what reconciliation finds (Redis behind the record) and repairs.
        await w.recorded.repairIfBehind(w.accountId);
        await w.catchUp();
        const rows = await testDb.db.query<{ request_id: string; cost: number }>(
          `SELECT request_id, cost FROM usage_records WHERE account_id = $1 AND status <> 'refused' ORDER BY request_id`,
          [w.accountId],
        );
        expect(rows.rows).toEqual([...applied].sort(([a], [b]) => (a < b ? -1 : 1)).map(([request_id, cost]) => ({ request_id, cost })));
        await expectHotEqualsRecord(w);
        const capped = await testDb.db.query<{ lifetime_spent: number }>('SELECT lifetime_spent FROM api_keys WHERE id = $1', [w.keyIds[0] ?? '']);
        expect(capped.rows[0]?.lifetime_spent ?? 0).toBeLessThanOrEqual(LIFETIME_CAP);
        await w.writer.close(0);
      }),
      { numRuns: 80 },
    );
  }, 120_000);

  it('a wiped account is refused by the hot path until seeded, then served from the recorded figures', async () => {
    const w = await world();
    const o = await reserveAndSettle(w.ledger, w, 'a1', w.keyIds[0] ?? '', 800, 700);
    expect(o?.charged).toBe(700);
    await w.catchUp();
    await w.wipe();
    // The scripts refuse it: a hot path on the same keys that has no loader (the gateway's has the
    // record's, which loads the account and tries again) sees the refusal as it is.
    const bare = createRedisBackend({ redis: testRedis.redis, namespace: w.namespace }).ledger;
    if (!isSeededLedger(bare)) throw new Error('the Redis ledger is seeded from the record');
    bare.requireSeeding();
    await expect(bare.reserve({ requestId: 'a2', accountId: w.accountId, keyId: w.keyIds[0] ?? '', amount: 1, holdTtlMs: 1000 })).rejects.toBeInstanceOf(
      AccountNotSeededError,
    );
    // Through the record's ledger: loaded, then admitted against the recorded balance and cap.
    const big = await w.ledger.reserve({ requestId: 'a3', accountId: w.accountId, keyId: w.keyIds[0] ?? '', amount: LIFETIME_CAP - 700 + 1, holdTtlMs: 1000 });
    expect(big).toMatchObject({ admitted: false, reason: 'key_lifetime_cap_reached', available: LIFETIME_CAP - 700 });
    expect(await w.hot.ledger.balance(w.accountId)).toEqual({ balance: 4_300, held: 0 });
    expect(await w.hot.ledger.keySpend(w.accountId, w.keyIds[0] ?? '')).toMatchObject({ lifetimeSpent: 700, monthSpent: 700 });
    await w.writer.close(0);
  });

  it('a hold the wipe took is charged when its request settles, once', async () => {
    const w = await world();
    const keyId = w.keyIds[1] ?? '';
    expect(await w.ledger.reserve({ requestId: 'lost', accountId: w.accountId, keyId, amount: 900, holdTtlMs: 60_000 })).toMatchObject({ admitted: true });
    await w.wipe();
    const first = await w.ledger.settle({ requestId: 'lost', accountId: w.accountId, keyId, ...usage(1_000) });
    // At most what the hold had reserved, as any settlement.
    expect(first).toMatchObject({ charged: 900, duplicate: false, late: true });
    const again = await w.ledger.settle({ requestId: 'lost', accountId: w.accountId, keyId, ...usage(1_000) });
    expect(again).toMatchObject({ charged: 0, duplicate: true });
    await w.catchUp();
    expect((await expectHotEqualsRecord(w)).balance).toBe(5_000 - 900);
    await w.writer.close(0);
  });

  it('a settlement applied before the wipe and committed after the reload is added once; one committed before is not added again', async () => {
    const w = await world();
    const keyId = w.keyIds[1] ?? '';
    await reserveAndSettle(w.ledger, w, 'before-commit', keyId, 500, 300);
    await w.writer.flush();
    await reserveAndSettle(w.ledger, w, 'after-commit', keyId, 500, 200);
    // The wipe: 'before-commit' is in PostgreSQL, 'after-commit' only in this writer's memory.
    await w.wipe();
    await w.recorded.seed(w.accountId);
    expect((await w.hot.ledger.balance(w.accountId)).balance).toBe(5_000 - 300);
    await w.catchUp();
    expect((await expectHotEqualsRecord(w)).balance).toBe(5_000 - 500);
    // A second trim pass of the same entries (a retried trim) applies nothing more.
    await w.stream.remove(await w.stream.pending(w.accountId));
    expect((await w.hot.ledger.balance(w.accountId)).balance).toBe(5_000 - 500);
    await w.writer.close(0);
  });

  it('a trim past one slice deletes every copy, in scripts of at most 500 ids, and after a wipe adds each uncounted charge once', async () => {
    const w = await world();
    const keyId = w.keyIds[1] ?? '';
    const settleMany = async (prefix: string, n: number): Promise<void> => {
      for (let i = 0; i < n; i += 100) {
        await Promise.all(Array.from({ length: Math.min(100, n - i) }, (_, j) => reserveAndSettle(w.ledger, w, `${prefix}-${i + j}`, keyId, 1, 1)));
      }
    };
    // What the trims send: each catch-up script's count of ids (MONITOR sees every command).
    const monitor = await testRedis.redis.monitor();
    const sent: number[] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      // EVALSHA sha numkeys keys... args...: the first argument is the count.
      if (/^eval(sha)?$/i.test(args[0] ?? '') && args[4] === w.keys.journal(w.accountId)) sent.push(Number(args[3 + Number(args[2])]));
    });
    try {
      await settleMany('slice', 1_200);
      // A flush commits whole batches and leaves a partial one for its next pass.
      while (w.writer.lag().count > 0) await w.writer.flush();
      await w.writer.trim();
      expect(await testRedis.redis.xlen(w.keys.journal(w.accountId)), 'every committed copy deleted').toBe(0);
      // MONITOR's feed trails the commands: wait until it has shown them all.
      await expect.poll(() => sent.reduce((a, b) => a + b, 0)).toBe(1_200);
      expect(Math.max(...sent)).toBeLessThanOrEqual(500);
      expect(sent.length).toBe(3);
      // Settled before a wipe, committed after the reload: the long form, slice by slice, adds each once.
      await settleMany('wiped', 1_200);
      await w.wipe();
      await w.recorded.seed(w.accountId);
      expect((await w.hot.ledger.balance(w.accountId)).balance).toBe(5_000 - 1_200);
      while (w.writer.lag().count > 0) await w.writer.flush();
      await w.writer.trim();
      expect((await expectHotEqualsRecord(w)).balance).toBe(5_000 - 2_400);
    } finally {
      monitor.disconnect();
      await w.writer.close(0);
    }
  });

  it('a credit committed before the reload read the record is not applied twice; one after it is applied', async () => {
    const w = await world();
    await w.wipe();
    // Committed to PostgreSQL while Redis is empty: the seed that follows counts it.
    expect(await w.ledger.credit(w.accountId, 1_000, `c1-${randomBytes(3).toString('hex')}`)).toBe(true);
    expect((await w.hot.ledger.balance(w.accountId)).balance).toBe(6_000);
    expect(await w.ledger.credit(w.accountId, 500, `c2-${randomBytes(3).toString('hex')}`)).toBe(true);
    expect((await expectHotEqualsRecord(w)).balance).toBe(6_500);
    await w.writer.close(0);
  });

  it('two gateways loading one account at once load it once', async () => {
    const w = await world();
    await w.wipe();
    const other = recordedBackend(createRedisBackend({ redis: testRedis.redis, namespace: `${testRedis.namespace}-${worldNo}` }), testDb.db, 'tg', { rebuildWindowMs: 0 });
    await Promise.all([w.recorded.seed(w.accountId), other.ledger.seed(w.accountId), w.recorded.seed(w.accountId)]);
    expect((await expectHotEqualsRecord(w)).balance).toBe(5_000);
    await w.writer.close(0);
  });

  it('a settlement another gateway commits and trims while this one reloads the account, between its read and its load, is counted once', async () => {
    const w = await world();
    const keyId = w.keyIds[0] ?? '';
    // Applied by the copy the wipe takes; committed by nobody yet.
    await reserveAndSettle(w.ledger, w, 'settled-before-wipe', keyId, 500, 300);
    await w.wipe();
    // This gateway reads the record (300 not in it), then the other commits and trims (Redis has no copy
    // of the account yet), then this one loads Redis.
    const paused = pausingReloads(testDb.db);
    const reloading = recordedBackend(createRedisBackend({ redis: testRedis.redis, namespace: w.namespace }), paused.db, 'tg', { rebuildWindowMs: 0 });
    paused.next(w.catchUp);
    await reloading.ledger.seed(w.accountId);
    expect((await expectHotEqualsRecord(w)).balance).toBe(5_000 - 300);
    expect(await w.hot.ledger.keySpend(w.accountId, keyId)).toMatchObject({ lifetimeSpent: 300, monthSpent: 300 });
    await w.writer.close(0);
  });

  it('a credit this gateway commits while its own reload of the account is between its read and its load is counted once', async () => {
    const paused = pausingReloads(testDb.db);
    const w = await world({ db: paused.db });
    await w.wipe();
    const idempotencyKey = `during-${randomBytes(3).toString('hex')}`;
    let credited: Promise<boolean> | undefined;
    paused.next(async () => {
      // The credit commits, finds the account not loaded and waits for the reload under way. Redis has
      // run its script once MONITOR shows it: the reload goes on to Redis after that.
      const monitor = await testRedis.redis.monitor();
      const seen = new Promise<void>((resolve) => {
        monitor.on('monitor', (_time: string, args: string[]) => {
          if (args.includes(w.keys.credit(w.accountId, idempotencyKey))) resolve();
        });
      });
      credited = w.recorded.credit(w.accountId, 1_000, idempotencyKey);
      await seen;
      monitor.disconnect();
    });
    // A reservation loads the account; the credit lands during that load.
    expect(await w.ledger.reserve({ requestId: 'loads', accountId: w.accountId, keyId: w.keyIds[1] ?? '', amount: 1, holdTtlMs: 60_000 })).toMatchObject({ admitted: true });
    expect(await credited).toBe(true);
    await w.ledger.settle({ requestId: 'loads', accountId: w.accountId, keyId: w.keyIds[1] ?? '', ...usage(0) });
    await w.catchUp();
    expect((await expectHotEqualsRecord(w)).balance).toBe(6_000);
    await w.writer.close(0);
  });

  it('a reload whose read is older than a second wipe is read again: what the account did in between is counted', async () => {
    const w = await world();
    const keyId = w.keyIds[1] ?? '';
    await w.wipe();
    const paused = pausingReloads(testDb.db);
    const reloading = recordedBackend(createRedisBackend({ redis: testRedis.redis, namespace: w.namespace }), paused.db, 'tg', { rebuildWindowMs: 0 });
    paused.next(async () => {
      // Meanwhile the other gateway loads the account itself, settles, commits and trims in that copy,
      // and Redis is wiped again.
      await reserveAndSettle(w.ledger, w, 'between-wipes', keyId, 500, 400);
      await w.catchUp();
      await w.wipe();
    });
    await reloading.ledger.seed(w.accountId);
    expect((await expectHotEqualsRecord(w)).balance).toBe(5_000 - 400);
    await w.writer.close(0);
  });
});
