// The journal's commit carries its batch as PostgreSQL array literals (journalColumns). Whatever text a
// request brings (a model id or key name with quotes, backslashes, commas, braces, spaces, the word NULL,
// an empty string, any Unicode) must come back from the record exactly as sent, on PostgreSQL and on the
// local run's PGlite, and a repeat must still add nothing.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RefusalReason } from '../../src/billing/ledger.js';
import { openPglite, type Database } from '../../src/record/database.js';
import { commitJournal, journalColumns, type JournalEntry } from '../../src/record/journal.js';
import { migrate } from '../../src/record/migrate.js';
import { useTestDatabase } from '../helpers/test-database.js';

const pgTest = useTestDatabase('journal_commit');

// PostgreSQL's text cannot hold U+0000; everything else can.
const text = fc.string({ unit: 'binary', maxLength: 24 }).filter((s) => !s.includes('\u0000'));
const awkward = fc.constantFrom('', 'NULL', 'null', ' padded ', 'a,b', '{x}', 'say "hi"', 'back\\slash', '\\"', 'tab\there', 'ünïcødé ✓');
const field = fc.oneof(awkward, text);

let seq = 0;
const entryOf = fc
  .record({
    model: field,
    keyId: field,
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
      expect(first.records).toBe(batch.length);
      expect(first.charged).toBe(batch.reduce((s, e) => s + e.cost, 0));
      // The same batch again, as a retry after a lost reply would send it: nothing new.
      expect(await commitJournal(db, batch)).toMatchObject({ records: 0, charged: 0 });
      const ids = batch.map((e) => e.requestId);
      const rows = await db.query<Row>(
        `SELECT request_id, key_id, model, input_tokens, output_tokens, cost, status, refusal_reason, http_status, started_at, finished_at
           FROM usage_records WHERE request_id = ANY($1::text[])`,
        [ids],
      );
      const byId = new Map(rows.rows.map((r) => [r.request_id, r]));
      expect(byId.size).toBe(batch.length);
      for (const e of batch) {
        const r = byId.get(e.requestId);
        expect(r).toMatchObject({
          key_id: e.keyId,
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
});
