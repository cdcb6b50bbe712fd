// The journal's commit loads a batch of new requests with COPY (journalLoad) and merges a batch that
// repeats one (journalColumns, INSERT ... ON CONFLICT). Whatever text a request brings (a model id or key
// name with quotes, backslashes, tabs, line breaks, commas, braces, the word NULL, an empty string, any
// Unicode) must come back from the record exactly as sent, on PostgreSQL and on the local run's PGlite,
// by either way in; and a repeat, whole or in part, alone or racing a first commit, adds only what is new.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RefusalReason } from '../../src/billing/ledger.js';
import { openPglite, type Database } from '../../src/record/database.js';
import { commitJournal, journalColumns, journalLoad, type JournalEntry } from '../../src/record/journal.js';
import { migrate } from '../../src/record/migrate.js';
import { useTestDatabase } from '../helpers/test-database.js';

const pgTest = useTestDatabase('journal_commit');

// PostgreSQL's text cannot hold U+0000; everything else can.
const text = fc.string({ unit: 'binary', maxLength: 24 }).filter((s) => !s.includes('\u0000'));
const awkward = fc.constantFrom('', 'NULL', 'null', '\\N', '\\.', ' padded ', 'a,b', '{x}', 'say "hi"', 'back\\slash', '\\"', 'tab\there', 'line\nbreak\r\n', 'ünïcødé ✓');
const field = fc.oneof(awkward, text);

let seq = 0;
const entryOf = fc
  .record({
    model: field,
    keyId: field,
    // The team a request is charged to, any text (or none): both ways in carry it exactly.
    teamId: fc.option(field, { nil: undefined }),
    status: fc.constantFrom('completed', 'client_cancelled', 'upstream_failed', 'refused'),
    refusal: fc.option(fc.constantFrom<RefusalReason>('insufficient_balance', 'key_lifetime_cap_reached', 'key_monthly_cap_reached'), { nil: undefined }),
    input: fc.nat({ max: 2_000_000 }),
    output: fc.nat({ max: 200_000 }),
    // Up to a million dollars a request: sums of a whole run stay exact integers.
    cost: fc.nat({ max: 1_000_000_000_000 }),
    latencyMs: fc.nat({ max: 600_000 }),
  })
  .map(
    (f): JournalEntry => ({
      requestId: '',
      accountId: 'acct_jc',
      keyId: f.keyId,
      ...(f.teamId === undefined ? {} : { teamId: f.teamId }),
      model: f.model,
      usage: { input: f.input, output: f.output, cachedInput: 0, reasoning: 0 },
      cost: f.refusal === undefined ? f.cost : 0,
      reserved: f.refusal === undefined ? f.cost : 0,
      status: f.refusal === undefined ? f.status : 'refused',
      latencyMs: f.latencyMs,
      month: '2026-11',
      time: Date.UTC(2026, 10, 20) + f.latencyMs,
      ...(f.refusal === undefined ? {} : { refusal: f.refusal }),
    }),
  );

interface Row {
  request_id: string;
  key_id: string;
  team_id: string | null;
  model: string;
  input_tokens: number;
  output_tokens: number;
  cost: number;
  status: string;
  refusal_reason: string | null;
  http_status: number | null;
  finished_at: Date;
  started_at: Date;
}

async function roundTrips(db: Database, runs: number): Promise<void> {
  await fc.assert(
    fc.asyncProperty(fc.array(entryOf, { minLength: 1, maxLength: 40 }), async (generated) => {
      // Fresh ids on every run, shrinking included (a shrunk case replays values already committed).
      const batch = generated.map((e) => ({ ...e, requestId: `req_jc_${seq++}` }));
      const first = await commitJournal(db, batch);
      expect(first).toMatchObject({ records: batch.length, charged: batch.reduce((s, e) => s + e.cost, 0), merged: false });
      // The same batch again, as a retry after a lost reply would send it: nothing new.
      expect(await commitJournal(db, batch)).toMatchObject({ records: 0, charged: 0, merged: true });
      const ids = batch.map((e) => e.requestId);
      const rows = await db.query<Row>(
        `SELECT request_id, key_id, team_id, model, input_tokens, output_tokens, cost, status, refusal_reason, http_status, started_at, finished_at
           FROM usage_records WHERE request_id = ANY($1::text[])`,
        [ids],
      );
      const byId = new Map(rows.rows.map((r) => [r.request_id, r]));
      expect(byId.size).toBe(batch.length);
      for (const e of batch) {
        const r = byId.get(e.requestId);
        expect(r).toMatchObject({
          key_id: e.keyId,
          // '' is no team: the journal writes none for it.
          team_id: e.teamId === undefined || e.teamId === '' ? null : e.teamId,
          model: e.model,
          input_tokens: e.usage.input,
          output_tokens: e.usage.output,
          cost: e.cost,
          status: e.status,
          refusal_reason: e.refusal ?? null,
          http_status: e.refusal === undefined ? null : 402,
        });
        expect(r?.finished_at.getTime()).toBe(e.time);
        expect(r?.started_at.getTime()).toBe(e.time - e.latencyMs);
      }
    }),
    { numRuns: runs },
  );
  // The account's total is exactly what the records charged.
  const totals = await db.query<{ balance: number; charged: number }>(
    `SELECT t.balance, (SELECT COALESCE(sum(cost), 0) FROM usage_records WHERE account_id = 'acct_jc')::bigint AS charged
       FROM account_totals t WHERE t.account_id = 'acct_jc'`,
  );
  expect(totals.rows[0]?.balance).toBe(-(totals.rows[0]?.charged ?? NaN));
}

describe('the journal commit carries any text exactly', () => {
  it('quotes every text element and escapes only backslash and double quote', () => {
    const [requestIds, , keyIds, models, inputs, , , , , , , , , , refusals] = journalColumns([
      { requestId: 'r1', accountId: 'a', keyId: 'NULL', model: 'say "hi" \\ {x},y', usage: { input: 3, output: 0, cachedInput: 0, reasoning: 0 }, cost: 0, reserved: 0, status: 'completed', latencyMs: 0, month: '2026-11', time: 1 },
      { requestId: 'r2', accountId: 'a', keyId: '', model: 'm', usage: { input: 4, output: 0, cachedInput: 0, reasoning: 0 }, cost: 0, reserved: 0, status: 'refused', latencyMs: 0, month: '2026-11', time: 2, refusal: 'insufficient_balance' },
    ]);
    expect(requestIds).toBe('{"r1","r2"}');
    expect(keyIds).toBe('{"NULL",""}');
    expect(models).toBe('{"say \\"hi\\" \\\\ {x},y","m"}');
    expect(inputs).toBe('{3,4}');
    expect(refusals).toBe('{NULL,"insufficient_balance"}');
  });

  it('refuses a number that is not a safe integer before anything is sent', () => {
    const bad: JournalEntry = { requestId: 'r', accountId: 'a', keyId: 'k', model: 'm', usage: { input: 1.5, output: 0, cachedInput: 0, reasoning: 0 }, cost: 0, reserved: 0, status: 'completed', latencyMs: 0, month: '2026-11', time: 1 };
    expect(() => journalColumns([bad])).toThrow(/1\.5 where an integer belongs/);
  });

  it('writes COPY rows in request order, escapes only what COPY reads, and sums a posting per charged account', () => {
    const load = journalLoad([
      entry('r2', 'acct_b', 5, { model: 'tab\there \\N' }),
      entry('r1', 'acct_b', 7, { model: 'line\nbreak\r' }),
      entry('r9', 'acct_a', 0, { status: 'refused', refusal: 'insufficient_balance' }),
      entry('r3', 'acct_c', 4, { teamId: 'team_x' }),
    ]);
    expect(load.rows.split('\n')).toEqual([
      'r1\tacct_b\tkey_1\tline\\nbreak\\r\t10\t2\t0\t0\t7\t7\tcompleted\t2026-11\t2026-11-20T00:00:00.000Z\t2026-11-20T00:00:01.500Z\t\\N\t\\N\t\\N\t\\N\tf\t\\N\t0\t0\t\\N',
      'r2\tacct_b\tkey_1\ttab\\there \\\\N\t10\t2\t0\t0\t5\t5\tcompleted\t2026-11\t2026-11-20T00:00:00.000Z\t2026-11-20T00:00:01.500Z\t\\N\t\\N\t\\N\t\\N\tf\t\\N\t0\t0\t\\N',
      'r3\tacct_c\tkey_1\tm\t10\t2\t0\t0\t4\t4\tcompleted\t2026-11\t2026-11-20T00:00:00.000Z\t2026-11-20T00:00:01.500Z\t\\N\t\\N\t\\N\t\\N\tf\t\\N\t0\t0\tteam_x',
      'r9\tacct_a\tkey_1\tm\t10\t2\t0\t0\t0\t0\trefused\t2026-11\t2026-11-20T00:00:00.000Z\t2026-11-20T00:00:01.500Z\t402\tinsufficient_balance\t\\N\t\\N\tf\t\\N\t0\t0\t\\N',
      '',
    ]);
    expect(load.accounts).toEqual(['acct_a', 'acct_b', 'acct_c']);
    // acct_a was only refused: no posting. A posting of one request names it.
    expect(load.postings).toEqual([
      { account: 'acct_b', amount: 12, requests: 2, requestId: null },
      { account: 'acct_c', amount: 4, requests: 1, requestId: 'r3' },
    ]);
    expect(load.charged).toBe(16);
    // Milliseconds keep three digits, across a second's edge too.
    const edge = journalLoad([entry('e1', 'a', 1, { time: Date.UTC(2026, 10, 20, 0, 0, 1, 5), latencyMs: 960 }), entry('e2', 'a', 1, { time: Date.UTC(2026, 10, 20, 0, 0, 1, 50), latencyMs: 0 })]);
    expect(edge.rows.split('\n').map((row) => row.split('\t').slice(12, 14))).toEqual([
      ['2026-11-20T00:00:00.045Z', '2026-11-20T00:00:01.005Z'],
      ['2026-11-20T00:00:01.050Z', '2026-11-20T00:00:01.050Z'],
      [],
    ]);
    expect(() => journalLoad([entry('r', 'a', 0.5)])).toThrow(/0\.5 where an integer belongs/);
  });

  it('on PostgreSQL: every field back as sent, repeats add nothing, the total matches the records', async () => {
    await roundTrips(pgTest.db, 60);
  });

  it('on PGlite (the local run): the same', async () => {
    const db = await openPglite();
    try {
      await migrate(db);
      await roundTrips(db, 25);
    } finally {
      await db.close();
    }
  });

  it('on PostgreSQL: a batch that repeats part of the record adds only the rest, and its postings sum only that', async () => {
    await partialRepeats(pgTest.db, 'pr');
  });

  it('on PGlite: the same', async () => {
    const db = await openPglite();
    try {
      await migrate(db);
      await partialRepeats(db, 'pr');
    } finally {
      await db.close();
    }
  });

  it('on PostgreSQL: writers racing overlapping batches record each request once and charge it once', async () => {
    const db = pgTest.db;
    for (let round = 0; round < 20; round++) {
      // Three writers (a gateway and two sweepers, say) each hold a random two-thirds of the same
      // requests, across three accounts, and commit at once.
      const all = Array.from({ length: 60 }, (_, n) => entry(`race_${round}_${n}`, `acct_race_${n % 3}`, 1 + (n % 7)));
      const shares = [0, 1, 2].map((w) => all.filter((_, n) => (n + w) % 3 !== 0));
      const results = await Promise.all(shares.map((share) => commitJournal(db, share)));
      expect(results.reduce((s, r) => s + r.records, 0)).toBe(all.length);
      expect(results.reduce((s, r) => s + r.charged, 0)).toBe(all.reduce((s, e) => s + e.cost, 0));
      // Each writer's share overlaps the others': at most one of them got in without merging.
      expect(results.filter((r) => !r.merged).length).toBeLessThanOrEqual(1);
    }
    const check = await db.query<{ account_id: string; records: number; charged: number; posted: number; balance: number }>(
      `SELECT t.account_id, (SELECT count(*) FROM usage_records u WHERE u.account_id = t.account_id)::int AS records,
              (SELECT COALESCE(sum(cost), 0) FROM usage_records u WHERE u.account_id = t.account_id)::bigint AS charged,
              (SELECT COALESCE(-sum(amount), 0) FROM ledger_entries l WHERE l.account_id = t.account_id AND kind = 'usage')::bigint AS posted,
              t.balance
         FROM account_totals t WHERE t.account_id LIKE 'acct_race_%' ORDER BY t.account_id`,
    );
    expect(check.rows.map((r) => r.records)).toEqual([400, 400, 400]);
    for (const r of check.rows) {
      expect(r.posted).toBe(r.charged);
      expect(r.balance).toBe(-r.charged);
    }
  });
});

function entry(requestId: string, accountId: string, cost: number, extra: Partial<JournalEntry> = {}): JournalEntry {
  return {
    requestId,
    accountId,
    keyId: 'key_1',
    model: 'm',
    usage: { input: 10, output: 2, cachedInput: 0, reasoning: 0 },
    cost,
    reserved: cost,
    status: 'completed',
    latencyMs: 1500,
    month: '2026-11',
    time: Date.UTC(2026, 10, 20) + 1500,
    ...extra,
  };
}

async function partialRepeats(db: Database, tag: string): Promise<void> {
  const first = [1, 2, 3, 4].map((n) => entry(`${tag}_${n}`, `acct_${tag}_${n % 2}`, 10 * n));
  expect(await commitJournal(db, first)).toMatchObject({ records: 4, charged: 100, merged: false });
  // Two of the first again, with three new ones (one refused, charging nothing).
  const second = [first[1] as JournalEntry, first[2] as JournalEntry, entry(`${tag}_5`, `acct_${tag}_1`, 50), entry(`${tag}_6`, `acct_${tag}_0`, 60), entry(`${tag}_7`, `acct_${tag}_0`, 0, { status: 'refused', refusal: 'key_monthly_cap_reached' })];
  expect(await commitJournal(db, second)).toMatchObject({ records: 3, charged: 110, merged: true });
  const rows = await db.query<{ account_id: string; records: number; charged: number; posted: number; postings: number }>(
    `SELECT a.id AS account_id, (SELECT count(*) FROM usage_records u WHERE u.account_id = a.id)::int AS records,
            (SELECT COALESCE(sum(cost), 0) FROM usage_records u WHERE u.account_id = a.id)::bigint AS charged,
            (SELECT COALESCE(-sum(amount), 0) FROM ledger_entries l WHERE l.account_id = a.id AND kind = 'usage')::bigint AS posted,
            (SELECT count(*) FROM ledger_entries l WHERE l.account_id = a.id AND kind = 'usage')::int AS postings
       FROM accounts a WHERE a.id LIKE $1 ORDER BY a.id`,
    [`acct_${tag}_%`],
  );
  expect(rows.rows).toEqual([
    { account_id: `acct_${tag}_0`, records: 4, charged: 20 + 40 + 60, posted: 120, postings: 2 },
    { account_id: `acct_${tag}_1`, records: 3, charged: 10 + 30 + 50, posted: 90, postings: 2 },
  ]);
}
