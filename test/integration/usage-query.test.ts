// Usage and statement queries of record, on a real PostgreSQL and on the local run's PGlite: keyset
// pages that cover every record once in order (ties on the finish time included), the filters, bad
// cursors refused, per-key daily spend, and a statement whose running balance adds up from the first
// entry to account_totals.balance.
import { describe, expect, it } from 'vitest';
import { openPglite, type Database, type Queryable, type SqlValue } from '../../src/record/database.js';
import { commitJournal, type JournalEntry } from '../../src/record/journal.js';
import { migrate } from '../../src/record/migrate.js';
import { recordMovement } from '../../src/record/money-movement.js';
import { statementPage } from '../../src/record/statement.js';
import { dailyKeySpend, findUsage, listUsagePage, UsageQueryError, type RecordedUsage, type UsagePageRequest } from '../../src/record/usage-query.js';
import { useTestDatabase } from '../helpers/test-database.js';

const pgTest = useTestDatabase('usage_query');

const BASE = Date.UTC(2026, 10, 1);

/**
 * `n` usage records of acct_q in one statement: seven share each finish second (page boundaries fall
 * inside ties), keys k1/k2 alternate, models m-a/m-b/m-c rotate, every fifth is refused.
 */
async function seed(db: Database, n: number): Promise<void> {
  await db.query(`INSERT INTO accounts (id, name) VALUES ('acct_q', 'q'), ('acct_other', 'other')`);
  await db.query(
    `INSERT INTO usage_records (request_id, account_id, key_id, model, cost, reserved, status, billing_month, started_at, finished_at)
     SELECT 'req_' || lpad(g::text, 6, '0'), 'acct_q', CASE WHEN g % 2 = 0 THEN 'k1' ELSE 'k2' END, 'm-' || chr(97 + g % 3),
            CASE WHEN g % 5 = 0 THEN 0 ELSE g END, 2 * g, CASE WHEN g % 5 = 0 THEN 'refused' ELSE 'completed' END, '2026-11',
            to_timestamp($1::double precision / 1000) + (g / 7) * interval '1 second' - interval '150 milliseconds',
            to_timestamp($1::double precision / 1000) + (g / 7) * interval '1 second'
       FROM generate_series(1, $2) AS g`,
    [BASE, n],
  );
  await db.query(
    `INSERT INTO usage_records (request_id, account_id, key_id, model, status, billing_month, started_at, finished_at)
     VALUES ('req_other', 'acct_other', 'k9', 'm-a', 'completed', '2026-11', now(), now())`,
  );
}

/** Every page of a query, checking each page's size and that the order never goes back. */
async function allPages(db: Database, req: UsagePageRequest): Promise<RecordedUsage[]> {
  const out: RecordedUsage[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 10_000; pages++) {
    const page = await listUsagePage(db, { ...req, ...(cursor === undefined ? {} : { cursor }) });
    if (page.nextCursor !== undefined) expect(page.records).toHaveLength(req.limit ?? 100);
    out.push(...page.records);
    if (page.nextCursor === undefined) return out;
    cursor = page.nextCursor;
  }
  throw new Error('paging did not end');
}

function expectNewestFirst(records: readonly RecordedUsage[]): void {
  for (let i = 1; i < records.length; i++) {
    const a = records[i - 1] as RecordedUsage;
    const b = records[i] as RecordedUsage;
    expect(a.finishedAt > b.finishedAt || (a.finishedAt === b.finishedAt && a.requestId > b.requestId), `${a.requestId} before ${b.requestId}`).toBe(true);
  }
}

async function exerciseUsage(db: Database, n: number, limit: number): Promise<void> {
  await seed(db, n);
  const all = await allPages(db, { accountId: 'acct_q', limit });
  expect(all).toHaveLength(n);
  expect(new Set(all.map((r) => r.requestId)).size).toBe(n);
  expectNewestFirst(all);
  expect(all[0]?.requestId).toBe(`req_${String(n).padStart(6, '0')}`);
  const sample = all.find((r) => r.requestId === 'req_000012');
  expect(sample).toMatchObject({ accountId: 'acct_q', keyId: 'k1', model: 'm-a', cost: 12, reserved: 24, status: 'completed', latencyMs: 150, refunded: false, billingMonth: '2026-11' });
  expect(sample?.finishedAt).toBe(BASE + 1000);

  const k1 = await allPages(db, { accountId: 'acct_q', keyId: 'k1', limit });
  expect(k1.map((r) => r.requestId)).toEqual(all.filter((r) => r.keyId === 'k1').map((r) => r.requestId));
  const refusedB = await allPages(db, { accountId: 'acct_q', model: 'm-b', status: 'refused', limit });
  expect(refusedB.length).toBeGreaterThan(0);
  expect(refusedB.map((r) => r.requestId)).toEqual(all.filter((r) => r.model === 'm-b' && r.status === 'refused').map((r) => r.requestId));
  // A time range: from inclusive, to exclusive.
  const from = new Date(BASE + 10_000);
  const to = new Date(BASE + 20_000);
  const ranged = await allPages(db, { accountId: 'acct_q', from, to, limit: 7 });
  expect(ranged.map((r) => r.requestId)).toEqual(all.filter((r) => r.finishedAt >= from.getTime() && r.finishedAt < to.getTime()).map((r) => r.requestId));
  expect(ranged).toHaveLength(70);
  // Another account's records never show, and its request is not found on this one.
  expect(all.some((r) => r.requestId === 'req_other')).toBe(false);
  expect(await findUsage(db, 'acct_q', 'req_other')).toBeUndefined();
  expect((await findUsage(db, 'acct_other', 'req_other'))?.accountId).toBe('acct_other');

  await expect(listUsagePage(db, { accountId: 'acct_q', cursor: 'not-a-cursor' })).rejects.toThrow(UsageQueryError);
  await expect(listUsagePage(db, { accountId: 'acct_q', cursor: Buffer.from('["1e5","x"]').toString('base64url') })).rejects.toThrow(UsageQueryError);
  await expect(listUsagePage(db, { accountId: 'acct_q', limit: 0 })).rejects.toThrow(UsageQueryError);
  await expect(listUsagePage(db, { accountId: 'acct_q', limit: 1001 })).rejects.toThrow(UsageQueryError);

  // Per-key daily spend: every record is on 2026-11-01 or the days after (g / 7 seconds).
  const days = await dailyKeySpend(db, { accountId: 'acct_q', days: 3, now: new Date(BASE + 3_600_000) });
  const expected = new Map<string, { spent: number; requests: number }>();
  for (const r of all) {
    const day = new Date(r.finishedAt).toISOString().slice(0, 10);
    const e = expected.get(`${r.keyId} ${day}`) ?? { spent: 0, requests: 0 };
    e.spent += r.cost;
    e.requests++;
    expected.set(`${r.keyId} ${day}`, e);
  }
  expect(new Map(days.map((d) => [`${d.keyId} ${d.day}`, { spent: d.spent, requests: d.requests }]))).toEqual(expected);
  expect((await dailyKeySpend(db, { accountId: 'acct_q', days: 1, keyId: 'k2', now: new Date(BASE + 3_600_000) })).every((d) => d.keyId === 'k2')).toBe(true);
  // A day window that ends before the records holds none of them.
  expect(await dailyKeySpend(db, { accountId: 'acct_q', days: 1, now: new Date(BASE - 86_400_000) })).toEqual([]);
  await expect(dailyKeySpend(db, { accountId: 'acct_q', days: 0 })).rejects.toThrow(UsageQueryError);
}

/** PostgreSQL's plan for the statement `run` sends (captured, then EXPLAINed with the same parameters). */
async function planOf(db: Database, run: (q: Queryable) => Promise<unknown>): Promise<string> {
  let sent: { text: string; params: readonly SqlValue[] } | undefined;
  const capture: Queryable = {
    query: <R>(text: string, params?: readonly SqlValue[]) => {
      sent = { text, params: params ?? [] };
      return Promise.resolve({ rows: [] as R[], rowCount: 0 });
    },
    exec: () => Promise.resolve(),
  };
  await run(capture);
  if (sent === undefined) throw new Error('no statement was sent');
  const r = await db.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${sent.text}`, sent.params);
  return r.rows.map((row) => row['QUERY PLAN']).join('\n');
}

function entry(requestId: string, cost: number): JournalEntry {
  return {
    requestId,
    accountId: 'acct_s',
    keyId: 'ks',
    model: 'm',
    usage: { input: 1, output: 1, cachedInput: 0, reasoning: 0 },
    cost,
    reserved: cost,
    status: 'completed',
    latencyMs: 5,
    month: '2026-11',
    time: BASE,
  };
}

async function exerciseStatement(db: Database): Promise<void> {
  await db.query(`INSERT INTO accounts (id, name) VALUES ('acct_s', 's')`);
  let expected = 0;
  // Money in through recordMovement, usage through the journal's own commit: the two writers of record.
  for (let i = 0; i < 9; i++) {
    await db.transaction((tx) => recordMovement(tx, { accountId: 'acct_s', kind: i === 0 ? 'top_up' : 'admin_credit', amount: 1_000_000 + i, idempotencyKey: `s-credit-${i}` }));
    expected += 1_000_000 + i;
    const batch = Array.from({ length: 30 }, (_, j) => entry(`s-req-${i}-${j}`, 1_000 * (j + 1) + i));
    await commitJournal(db, batch);
    expected -= batch.reduce((s, e) => s + e.cost, 0);
  }
  await db.transaction((tx) => recordMovement(tx, { accountId: 'acct_s', kind: 'refund', amount: 1_003, idempotencyKey: 'refund:s-req-3-0', requestId: 's-req-3-0' }));
  expected += 1_003;
  const lines = [];
  let cursor: string | undefined;
  do {
    const page = await statementPage(db, { accountId: 'acct_s', limit: 4, ...(cursor === undefined ? {} : { cursor }) });
    lines.push(...page.lines);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  // Each commit of 30 records is one usage posting.
  expect(lines).toHaveLength(9 + 9 + 1);
  const totals = (await db.query<{ balance: number }>(`SELECT balance FROM account_totals WHERE account_id = 'acct_s'`)).rows[0]?.balance;
  expect(totals).toBe(expected);
  // Newest first; the newest line's balance is the account's, the oldest's is its own amount, and
  // every line's balance is the older line's plus its amount, across page boundaries.
  expect(lines[0]?.balanceAfter).toBe(expected);
  expect(lines[0]).toMatchObject({ kind: 'refund', amount: 1_003, requestId: 's-req-3-0' });
  const oldest = lines[lines.length - 1];
  expect(oldest).toMatchObject({ kind: 'top_up', amount: 1_000_000, balanceAfter: 1_000_000 });
  for (let i = 0; i + 1 < lines.length; i++) {
    const newer = lines[i];
    const older = lines[i + 1];
    expect(newer?.balanceAfter).toBe((older?.balanceAfter ?? NaN) + (newer?.amount ?? NaN));
    expect((newer?.entryId ?? 0) > (older?.entryId ?? 0)).toBe(true);
  }
  const postings = lines.filter((l) => l.kind === 'usage');
  expect(postings).toHaveLength(9);
  for (const [n, p] of postings.reverse().entries()) {
    expect(p).toMatchObject({ memo: '30 requests', requestId: null, amount: -Array.from({ length: 30 }, (_, j) => 1_000 * (j + 1) + n).reduce((a, b) => a + b, 0) });
  }
  await expect(statementPage(db, { accountId: 'acct_s', cursor: '12; DROP TABLE x' })).rejects.toThrow(UsageQueryError);
  expect(await statementPage(db, { accountId: 'acct_nobody' })).toEqual({ lines: [] });
}

describe('usage of record', () => {
  it('on PostgreSQL: 3,000 records paged completely in order, filters, daily spend', async () => {
    await exerciseUsage(pgTest.db, 3_000, 250);
  });

  it('on PostgreSQL: newest-first pages read the ascending indexes backwards, with no sort', async () => {
    // An account of its own: 3,000 records of a busy key, and 20 of a rarely used one (for which its own
    // index is the better way in; the busy key's records are most of the account's, which its index serves).
    await pgTest.db.query(
      `INSERT INTO usage_records (request_id, account_id, key_id, model, status, billing_month, started_at, finished_at)
       SELECT 'plan_' || g, 'acct_plan', CASE WHEN g <= 20 THEN 'k_rare' ELSE 'k_busy' END, 'm-a', 'completed', '2026-11',
              now(), now() + g * interval '1 ms'
         FROM generate_series(1, 3020) AS g`,
    );
    await pgTest.db.query('ANALYZE usage_records');
    const cursor = (await listUsagePage(pgTest.db, { accountId: 'acct_plan', limit: 50 })).nextCursor;
    expect(cursor).toBeTypeOf('string');
    const byAccount = await planOf(pgTest.db, (q) => listUsagePage(q, { accountId: 'acct_plan', limit: 50, ...(cursor === undefined ? {} : { cursor }) }));
    expect(byAccount).toMatch(/Index Scan Backward using usage_records_by_account_asc/);
    expect(byAccount).not.toMatch(/Sort/);
    const byKey = await planOf(pgTest.db, (q) => listUsagePage(q, { accountId: 'acct_plan', keyId: 'k_rare', limit: 10 }));
    expect(byKey).toMatch(/Index Scan Backward using usage_records_by_key_asc/);
    expect(byKey).not.toMatch(/Sort/);
  });

  it('on PostgreSQL: the statement adds up to the account total across pages', async () => {
    await exerciseStatement(pgTest.db);
  });

  it('on PGlite (the local run): the same', async () => {
    const db = await openPglite();
    try {
      await migrate(db);
      await exerciseUsage(db, 700, 60);
      await exerciseStatement(db);
    } finally {
      await db.close();
    }
  });
});
