// Property test of the journal against a real PostgreSQL and the real Redis ledger: random traffic
// (reserve, settle, duplicate settle, expire) interleaved with journal faults (a writer that dies with
// entries pending, a COMMIT whose reply is lost, a database that refuses, sweeps by another writer).
// Whatever the interleaving, once the journal has caught up every applied settlement is in PostgreSQL
// exactly once, the Redis streams are empty, and the totals the triggers keep agree with the rows and
// with Redis to the micro-dollar.
import { AccountService } from '../../src/account-service/account-service.js';
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { startAdminServer } from '../../src/admin/server.js';
import { createMemoryBackend, createRedisBackend, type Backend } from '../../src/billing/backends.js';
import { redisKeys } from '../../src/billing/redis-keys.js';
import { RedisJournalStream } from '../../src/record/redis-journal-stream.js';
import { openPglite, type Database, type Transaction } from '../../src/record/database.js';
import { JournalWriter } from '../../src/record/journal-writer.js';
import { JournaledLedger } from '../../src/record/journaled-ledger.js';
import { migrate } from '../../src/record/migrate.js';
import { reconcile } from '../../src/record/reconcile.js';
import { reconcileSources } from '../../src/record/reconcile-job.js';
import { useTestDatabase } from '../helpers/test-database.js';
import { useTestRedis } from '../helpers/test-redis.js';

const testRedis = useTestRedis('t-journal-prop');
const testDb = useTestDatabase('journal_prop');

type Op =
  | { t: 'reserve'; key: number; amount: number }
  | { t: 'settle'; req: number; cost: number }
  | { t: 'expire' }
  | { t: 'flush' }
  | { t: 'crash' }
  | { t: 'lostReply' }
  | { t: 'refuse' }
  | { t: 'sweep' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.record({ t: fc.constant('reserve' as const), key: fc.nat(1), amount: fc.integer({ min: 0, max: 900 }) }) },
  { weight: 5, arbitrary: fc.record({ t: fc.constant('settle' as const), req: fc.nat(), cost: fc.nat(1200) }) },
  { weight: 1, arbitrary: fc.constant({ t: 'expire' as const }) },
  { weight: 2, arbitrary: fc.constant({ t: 'flush' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'crash' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'lostReply' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'refuse' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'sweep' as const }) },
);

/** The real database, with one-shot faults: refuse the next commit, or commit it and lose the reply. */
class FaultyDatabase implements Database {
  next: 'none' | 'refuse' | 'lostReply' = 'none';
  constructor(private readonly db: Database) {}
  get kind(): Database['kind'] {
    return this.db.kind;
  }
  // The next statement or transaction (the journal's commit is one statement) meets the fault.
  query: Database['query'] = (text, params, opts) => this.faulty(() => this.db.query(text, params, opts));
  exec: Database['exec'] = (script) => this.db.exec(script);
  transaction<T>(fn: (tx: Transaction) => Promise<T>): Promise<T> {
    return this.faulty(() => this.db.transaction(fn));
  }
  private async faulty<T>(run: () => Promise<T>): Promise<T> {
    const fault = this.next;
    this.next = 'none';
    if (fault === 'refuse') throw new Error('connection refused (injected)');
    const r = await run();
    if (fault === 'lostReply') throw new Error('connection reset after COMMIT (injected)');
    return r;
  }
  close = (): Promise<void> => Promise.resolve();
}

interface Settled {
  rid: string;
  keyId: string;
  charged: number;
  month: string;
}

async function accountOfRecord(db: Database, backend: Backend, name: string, caps: { lifetimeCap?: number }[]): Promise<{ accountId: string; keyIds: string[] }> {
  const acct = await backend.accounts.createAccount(name);
  await db.query('INSERT INTO accounts (id, name) VALUES ($1, $2)', [acct.id, name]);
  const keyIds: string[] = [];
  for (const c of caps) {
    const k = (await backend.accounts.createKey(acct.id, c)).record;
    await db.query(`INSERT INTO api_keys (id, account_id, secret_hash, display_prefix, last_four, name) VALUES ($1, $2, $3, 'sk-tg-x', 'abcd', 'k')`, [
      k.id,
      acct.id,
      randomBytes(16).toString('hex'),
    ]);
    keyIds.push(k.id);
  }
  await backend.ledger.credit(acct.id, 3000, 'initial');
  await db.query(`INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key) VALUES ($1, 'top_up', 3000, $2)`, [acct.id, `initial:${acct.id}`]);
  return { accountId: acct.id, keyIds };
}

/** The 402s journaled: request id -> the limit that refused. */
async function refusedRows(db: Database, accountId: string): Promise<Map<string, string>> {
  const rows = await db.query<{ request_id: string; refusal_reason: string; http_status: number; cost: number }>(
    `SELECT request_id, refusal_reason, http_status, cost FROM usage_records WHERE account_id = $1 AND status = 'refused'`,
    [accountId],
  );
  for (const r of rows.rows) expect(r).toMatchObject({ http_status: 402, cost: 0 });
  return new Map(rows.rows.map((r) => [r.request_id, r.refusal_reason]));
}

/** PostgreSQL's view equals the settlements applied, once each, and its totals equal Redis's books. */
async function checkRecord(db: Database, backend: Backend, accountId: string, keyIds: string[], settled: Settled[]): Promise<void> {
  const rows = await db.query<{ request_id: string; key_id: string; cost: number; billing_month: string }>(
    `SELECT request_id, key_id, cost, billing_month FROM usage_records WHERE account_id = $1 AND status <> 'refused' ORDER BY request_id`,
    [accountId],
  );
  const expected = [...settled].sort((a, b) => (a.rid < b.rid ? -1 : 1)).map((s) => ({ request_id: s.rid, key_id: s.keyId, cost: s.charged, billing_month: s.month }));
  expect(rows.rows).toEqual(expected);
  // Usage postings (one per account per commit) name how many requests they sum: together they count
  // each charged settlement once and sum to exactly what was charged.
  const usage = await db.query<{ n: number; total: number }>(
    `SELECT COALESCE(sum(split_part(memo, ' ', 1)::int), 0)::int AS n, COALESCE(-sum(amount), 0)::bigint AS total FROM ledger_entries WHERE account_id = $1 AND kind = 'usage'`,
    [accountId],
  );
  const charged = settled.reduce((s, r) => s + r.charged, 0);
  expect(usage.rows[0]).toEqual({ n: settled.filter((s) => s.charged > 0).length, total: charged });
  const totals = await db.query<{ balance: number; charged: number }>('SELECT balance, charged FROM account_totals WHERE account_id = $1', [accountId]);
  expect(totals.rows[0]).toEqual({ balance: 3000 - charged, charged });
  const bal = await backend.ledger.balance(accountId);
  expect(bal.balance, 'Redis balance = PostgreSQL balance').toBe(3000 - charged);
  for (const keyId of keyIds) {
    const spend = await backend.ledger.keySpend(accountId, keyId);
    const k = await db.query<{ lifetime_spent: number }>('SELECT lifetime_spent FROM api_keys WHERE id = $1', [keyId]);
    expect(k.rows[0]?.lifetime_spent, 'key lifetime spend').toBe(spend.lifetimeSpent);
    const m = await db.query<{ spent: number }>('SELECT COALESCE(sum(spent), 0)::bigint AS spent FROM key_month_spend WHERE key_id = $1', [keyId]);
    expect(m.rows[0]?.spent, 'key month spend').toBe(spend.monthSpent);
  }
}

let runNo = 0;

describe('journal (Redis streams to PostgreSQL) properties', () => {
  it('commits every applied settlement exactly once through crashes, lost replies, refusals and sweeps', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(opArb, { minLength: 1, maxLength: 40 }), async (ops) => {
        const namespace = `${testRedis.namespace}-${++runNo}`;
        const backend = createRedisBackend({ redis: testRedis.redis, namespace });
        const stream = new RedisJournalStream(testRedis.redis, redisKeys(namespace));
        const db = new FaultyDatabase(testDb.db);
        // No timers: the test decides when each writer flushes and sweeps.
        // Merged commits, by any writer: a batch whose COMMIT reply was lost comes back as a repeat.
        let merges = 0;
        let lostWithPending = 0;
        const newWriter = (): JournalWriter =>
          new JournalWriter({ db, stream, maxLagMs: 60_000, intervalMs: 1e9, sweepIntervalMs: 0, sweepGraceMs: 0, onCommitted: (_r, _c, merged) => void (merges += merged ? 1 : 0) });
        let writer = newWriter();
        let ledger = new JournaledLedger(backend.ledger, writer);
        const { accountId, keyIds } = await accountOfRecord(testDb.db, backend, `p${runNo}`, [{ lifetimeCap: 2000 }, {}]);
        let now = Date.now();
        const reqs: { rid: string; keyId: string; open: boolean }[] = [];
        const settled: Settled[] = [];
        const refusals = new Map<string, string>();
        for (const op of ops) {
          if (op.t === 'reserve') {
            const rid = `req_${runNo}_${reqs.length}`;
            const keyId = keyIds[op.key] ?? '';
            const r = await ledger.reserve({ requestId: rid, accountId, keyId, amount: op.amount, holdTtlMs: 1_000, now, model: 'm' });
            if (!r.admitted) refusals.set(rid, r.reason);
            reqs.push({ rid, keyId, open: r.admitted });
          } else if (op.t === 'settle') {
            const r = reqs[op.req % Math.max(1, reqs.length)];
            if (r === undefined) continue;
            const o = await ledger.settle({ requestId: r.rid, accountId, keyId: r.keyId, model: 'm', usage: { input: op.cost, output: 1, cachedInput: 0, reasoning: 0 }, cost: op.cost, status: 'completed', latencyMs: 3, now });
            if (!o.duplicate) {
              expect(o.journal?.entryId).toBeTypeOf('string');
              settled.push({ rid: r.rid, keyId: r.keyId, charged: o.charged, month: o.journal?.month ?? '' });
            }
            r.open = false;
          } else if (op.t === 'expire') {
            now += 2_000;
            await ledger.reap(now);
          } else if (op.t === 'flush') {
            await writer.flush();
          } else if (op.t === 'crash') {
            // The process dies: what it held in memory is gone; the Redis streams still have it.
            await writer.close(0);
            writer = newWriter();
            ledger = new JournaledLedger(backend.ledger, writer);
          } else if (op.t === 'lostReply' || op.t === 'refuse') {
            if (op.t === 'lostReply' && writer.lag().count > 0) lostWithPending++;
            db.next = op.t;
            await writer.flush();
          } else {
            // Another gateway's sweeper commits whatever is in the streams.
            const other = newWriter();
            await other.sweep();
            await other.flush();
            await other.close(0);
          }
        }
        // Catch up: this writer's own entries, then a sweep for what died with earlier writers.
        db.next = 'none';
        await writer.flush();
        await writer.sweep();
        await writer.flush();
        await writer.trim();
        expect(writer.lag()).toEqual({ count: 0, oldestMs: 0 });
        expect(await testRedis.redis.xlen(redisKeys(namespace).journal(accountId)), 'streams trimmed after commit').toBe(0);
        await checkRecord(testDb.db, backend, accountId, keyIds, settled);
        if (lostWithPending > 0) expect(merges, 'a batch committed once already is merged, not loaded').toBeGreaterThan(0);
        // Refusals live in a writer's memory only (no money moved): a crash may lose some, never invent one.
        for (const [rid, reason] of await refusedRows(testDb.db, accountId)) expect(refusals.get(rid)).toBe(reason);
        await writer.close(0);
      }),
      { numRuns: 40 },
    );
  }, 120_000);

  it('the memory hot path journals to PGlite through the same writer', async () => {
    const db = await openPglite();
    try {
      await migrate(db);
      const backend = createMemoryBackend();
      const writer = new JournalWriter({ db, maxLagMs: 60_000 });
      const ledger = new JournaledLedger(backend.ledger, writer);
      const { accountId, keyIds } = await accountOfRecord(db, backend, 'local', [{}]);
      const keyId = keyIds[0] ?? '';
      const settled: Settled[] = [];
      // A 402 is journaled with the limit that refused it.
      const refused = await ledger.reserve({ requestId: 'local_big', accountId, keyId, amount: 1_000_000, holdTtlMs: 1_000, model: 'm' });
      expect(refused).toMatchObject({ admitted: false, reason: 'insufficient_balance' });
      for (let i = 0; i < 20; i++) {
        const rid = `local_${i}`;
        await ledger.reserve({ requestId: rid, accountId, keyId, amount: 100, holdTtlMs: 1_000 });
        const o = await ledger.settle({ requestId: rid, accountId, keyId, model: 'm', usage: { input: 1, output: 1, cachedInput: 0, reasoning: 0 }, cost: i * 7, status: 'completed', latencyMs: 1 });
        // A repeat changes nothing and journals nothing.
        await ledger.settle({ requestId: rid, accountId, keyId, model: 'm', usage: { input: 1, output: 1, cachedInput: 0, reasoning: 0 }, cost: i * 7, status: 'completed', latencyMs: 1 });
        settled.push({ rid, keyId, charged: o.charged, month: o.journal?.month ?? '' });
      }
      await writer.close();
      await checkRecord(db, backend, accountId, keyIds, settled);
      expect(await refusedRows(db, accountId)).toEqual(new Map([['local_big', 'insufficient_balance']]));
    } finally {
      await db.close();
    }
  });

  it('reconciliation agrees with settlements still in the journal, and names each difference to the micro-dollar', async () => {
    const namespace = `${testRedis.namespace}-rec`;
    const backend = createRedisBackend({ redis: testRedis.redis, namespace });
    const keys = redisKeys(namespace);
    const stream = new RedisJournalStream(testRedis.redis, keys);
    const writer = new JournalWriter({ db: testDb.db, stream, maxLagMs: 60_000, intervalMs: 1e9, sweepIntervalMs: 0 });
    const ledger = new JournaledLedger(backend.ledger, writer);
    const { accountId, keyIds } = await accountOfRecord(testDb.db, backend, 'rec', [{}]);
    const keyId = keyIds[0] ?? '';
    const settle = async (rid: string, cost: number): Promise<void> => {
      await ledger.reserve({ requestId: rid, accountId, keyId, amount: 500, holdTtlMs: 60_000 });
      await ledger.settle({ requestId: rid, accountId, keyId, model: 'm', usage: { input: 1, output: 1, cachedInput: 0, reasoning: 0 }, cost, status: 'completed', latencyMs: 1 });
    };
    await settle('rec_1', 120);
    await writer.flush();
    await settle('rec_2', 80);
    // rec_2 is applied in Redis and only in the journal; a hold is outstanding too.
    await ledger.reserve({ requestId: 'rec_3', accountId, keyId, amount: 300, holdTtlMs: 60_000 });
    const books = reconcileSources(testDb.db, backend, stream, writer);
    expect(await reconcile(books, [accountId])).toMatchObject({ accounts: 1, accountsDiffering: 0, totalDifference: 0, differences: [] });

    // Redis loses 7 micro-USD of balance; PostgreSQL gets a usage record without its ledger entry.
    await testRedis.redis.hincrby(keys.account(accountId), 'balance', -7);
    await testDb.db.query(
      `INSERT INTO usage_records (request_id, account_id, key_id, model, cost, status, billing_month, started_at, finished_at)
       VALUES ('rec_x', $1, $2, 'm', 5, 'completed', '2026-01', now(), now())`,
      [accountId, keyId],
    );
    const report = await reconcile(books, [accountId]);
    expect(report.differences).toEqual(
      expect.arrayContaining([
        { accountId, field: 'balance', expected: 3000 - 200, actual: 3000 - 207, difference: -7 },
        { accountId, field: 'usage_ledger', expected: 125, actual: 120, difference: -5 },
        { accountId, field: 'key_lifetime', keyId, expected: 205, actual: 200, difference: -5 },
      ]),
    );
    expect(report.accountsDiffering).toBe(1);
    expect(report.totalDifference).toBe(report.differences.reduce((s, d) => s + Math.abs(d.difference), 0));

    // The admin API serves the same report; without the record it says why there is none.
    const accounts = new AccountService({ accounts: backend.accounts, ledger: backend.ledger });
    const admin = await startAdminServer({ accounts, ledger: backend.ledger, token: 'admin-token', reconcile: () => reconcile(books, [accountId]) }, 0, '127.0.0.1');
    const bare = await startAdminServer({ accounts, ledger: backend.ledger, token: 'admin-token' }, 0, '127.0.0.1');
    try {
      const res = await fetch(`${admin.url}/admin/reconciliation`, { headers: { authorization: 'Bearer admin-token' } });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { differences: unknown[] }).differences).toEqual(report.differences);
      const none = await fetch(`${bare.url}/admin/reconciliation`, { headers: { authorization: 'Bearer admin-token' } });
      expect(none.status).toBe(404);
      expect(((await none.json()) as { error: { message: string } }).error.message).toMatch(/needs the record/);
    } finally {
      await admin.close();
      await bare.close();
    }
    await writer.close(0);
  });
});
