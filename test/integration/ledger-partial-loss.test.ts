// Redis going back to an older copy of an account (what a restart from an older AOF or RDB, or a failover
// to a lagging replica, does) while the generation stays, over a real Redis and a real PostgreSQL with
// the production composition (the record's ledger under the journal). The namespace's keys are dumped at
// one point and restored later, so the loss is exact and its point chosen: every case below is a way
// the lost writes must be noticed and the account loaded again from the record. On ef46cfd none was: a
// settlement whose hold was lost was charged 0 as a duplicate, and Redis kept money the record had spent.
import { describe, expect, it } from 'vitest';
import { createRedisBackend } from '../../src/billing/backends.js';
import { redisKeys } from '../../src/billing/redis-keys.js';
import { RedisJournalStream } from '../../src/record/redis-journal-stream.js';
import { JournalWriter } from '../../src/record/journal-writer.js';
import { JournaledLedger } from '../../src/record/journaled-ledger.js';
import { reconcile } from '../../src/record/reconcile.js';
import { reconcileSources } from '../../src/record/reconcile-job.js';
import { recordedBackend } from '../../src/record/recorded-backend.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTestRedis } from '../helpers/test-redis.js';

const testRedis = useTestRedis('t-partial');
const testDb = useTestDatabase('partial');
let worldNo = 0;
let requestNo = 0;

/** One gateway's composition over a namespace (a second gateway over the same one: `gateway()` again). */
function gateway(namespace: string) {
  const hot = createRedisBackend({ redis: testRedis.redis, namespace });
  const backend = recordedBackend(hot, testDb.db, 'tg', { rebuildWindowMs: 0, movementSweepMs: 0, keySweepMs: 0 });
  const stream = new RedisJournalStream(testRedis.redis, redisKeys(namespace));
  const writer = new JournalWriter({ db: testDb.db, stream, maxLagMs: 600_000, intervalMs: 1e9, sweepIntervalMs: 0, trimIntervalMs: 1e9, trimAfterCommit: false });
  const ledger = new JournaledLedger(backend.ledger, writer);
  const catchUp = async (): Promise<void> => {
    await writer.flush();
    await writer.trim();
  };
  return { hot, backend, stream, writer, ledger, catchUp };
}

async function world() {
  const namespace = `${testRedis.namespace}-${++worldNo}`;
  const g = gateway(namespace);
  const account = await g.backend.accounts.createAccount(`partial ${worldNo}`);
  const keyId = (await g.backend.accounts.createKey(account.id, { name: 'k' })).record.id;
  await g.backend.ledger.credit(account.id, 1_000_000, `start-${account.id}`);
  /** Every key of the namespace as it is now; the function puts them back, dropping what came since. */
  const snapshot = async (): Promise<() => Promise<void>> => {
    const names = await testRedis.redis.keys(`${namespace}:*`);
    const saved = await Promise.all(names.map(async (n) => ({ n, ttl: await testRedis.redis.pttl(n), data: await testRedis.redis.dumpBuffer(n) })));
    return async () => {
      const now = await testRedis.redis.keys(`${namespace}:*`);
      if (now.length > 0) await testRedis.redis.del(...now);
      for (const s of saved) if (s.data !== null) await testRedis.redis.restore(s.n, s.ttl > 0 ? s.ttl : 0, s.data);
    };
  };
  return { ...g, namespace, accountId: account.id, keyId, snapshot };
}

type World = Awaited<ReturnType<typeof world>>;

const settlement = (w: World, requestId: string, cost: number) => ({
  requestId,
  accountId: w.accountId,
  keyId: w.keyId,
  model: 'm',
  usage: { input: cost, output: 1, cachedInput: 0, reasoning: 0 },
  cost,
  status: 'completed' as const,
  latencyMs: 1,
});

async function reserve(ledger: World['ledger'], w: World, amount = 5_000): Promise<string> {
  const requestId = `req_partial_${process.pid}_${++requestNo}`;
  expect(await ledger.reserve({ requestId, accountId: w.accountId, keyId: w.keyId, amount, holdTtlMs: 600_000 })).toMatchObject({ admitted: true });
  return requestId;
}

async function recorded(w: World): Promise<{ balance: number; spent: number; records: number }> {
  const t = await testDb.db.query<{ balance: number }>('SELECT balance FROM account_totals WHERE account_id = $1', [w.accountId]);
  const k = await testDb.db.query<{ lifetime_spent: number }>('SELECT lifetime_spent FROM api_keys WHERE id = $1', [w.keyId]);
  const u = await testDb.db.query<{ n: number }>('SELECT count(*)::int AS n FROM usage_records WHERE account_id = $1', [w.accountId]);
  return { balance: Number(t.rows[0]?.balance), spent: Number(k.rows[0]?.lifetime_spent), records: Number(u.rows[0]?.n) };
}

/** Redis agrees with the record to the micro-dollar, no hold left, and reconciliation finds nothing. */
async function expectBooksAgree(w: World, g: ReturnType<typeof gateway> = w): Promise<void> {
  const rec = await recorded(w);
  expect(await w.hot.ledger.balance(w.accountId), 'Redis balance = record').toEqual({ balance: rec.balance, held: 0 });
  expect((await w.hot.ledger.keySpend(w.accountId, w.keyId)).lifetimeSpent, 'Redis key spend = record').toBe(rec.spent);
  const report = await reconcile(reconcileSources(testDb.db, g.backend, g.stream, g.writer), [w.accountId]);
  expect(report.differences).toEqual([]);
}

describe('Redis back at an older copy of the account, generation unchanged', () => {
  it('a hold the loss took is charged from its settlement, not taken as a duplicate', async () => {
    const w = await world();
    const point = await w.snapshot();
    const rid = await reserve(w.ledger, w);
    await point();
    const out = await w.ledger.settle(settlement(w, rid, 1_234));
    expect(out).toMatchObject({ charged: 1_234, duplicate: false });
    await w.catchUp();
    expect(await recorded(w)).toEqual({ balance: 1_000_000 - 1_234, spent: 1_234, records: 1 });
    await expectBooksAgree(w);
  });

  it('the same when other gateways wrote past the lost seq meanwhile: a hold of this generation that is gone means a loss', async () => {
    const w = await world();
    const point = await w.snapshot();
    const rid = await reserve(w.ledger, w);
    await point();
    // Another gateway (no memory of the lost writes) takes and settles holds: Redis's seq passes the one
    // this gateway was answered with, so only the missing hold tells.
    const other = gateway(w.namespace);
    for (let i = 0; i < 3; i++) {
      const r = await reserve(other.ledger, w, 100);
      await other.ledger.settle(settlement(w, r, 10));
    }
    const out = await w.ledger.settle(settlement(w, rid, 700));
    expect(out).toMatchObject({ charged: 700, duplicate: false });
    await other.catchUp();
    await w.catchUp();
    expect(await recorded(w)).toEqual({ balance: 1_000_000 - 730, spent: 730, records: 4 });
    await expectBooksAgree(w);
  });

  it('settlements the record committed and Redis lost: the gateway that was answered notices at its next call', async () => {
    const w = await world();
    const point = await w.snapshot();
    for (let i = 0; i < 3; i++) await w.ledger.settle(settlement(w, await reserve(w.ledger, w), 2_000));
    await w.writer.flush();
    // Redis goes back: it still has the money the three settlements spent, the record does not.
    await point();
    expect((await w.hot.ledger.balance(w.accountId)).balance).toBe(1_000_000);
    const rid = await reserve(w.ledger, w);
    await w.ledger.settle(settlement(w, rid, 500));
    await w.catchUp();
    expect(await recorded(w)).toEqual({ balance: 1_000_000 - 6_500, spent: 6_500, records: 4 });
    await expectBooksAgree(w);
  });

  it('no gateway remembers (all restarted): reconciliation finds Redis behind the record and loads it again', async () => {
    const w = await world();
    const point = await w.snapshot();
    for (let i = 0; i < 3; i++) await w.ledger.settle(settlement(w, await reserve(w.ledger, w), 2_000));
    await w.catchUp();
    await point();
    const fresh = gateway(w.namespace);
    const first = await reconcile(reconcileSources(testDb.db, fresh.backend, fresh.stream, fresh.writer), [w.accountId]);
    expect(first.differences.map((d) => [d.field, d.repaired])).toEqual([['hot_behind', true]]);
    expect(await recorded(w)).toEqual({ balance: 1_000_000 - 6_000, spent: 6_000, records: 3 });
    await expectBooksAgree(w, fresh);
    // And the next request is billed against the record's figures.
    await fresh.ledger.settle(settlement(w, await reserve(fresh.ledger, w), 100));
    await fresh.catchUp();
    await expectBooksAgree(w, fresh);
  });
});
