// The journal's commit: settlements the hot path applied, written to PostgreSQL once each. The usage
// records, and one 'usage' ledger posting per account for what those records charged, go in one
// statement. The records are keyed by request id, so a repeat (two writers, a retry after a lost COMMIT
// reply, a sweep of a dead pod's stream) inserts none and its posting sums nothing: a record and its
// share of a posting exist together or not at all. A posting's idempotency key names the transaction
// that wrote it (`usage:<xid>:<account>`); a posting of one record also names its request.
import type { Micros, RefusalReason, RequestOfRecord, SettlementOutcome, SettlementRequest } from '../billing/ledger.js';
import type { Database } from './database.js';

export interface JournalEntry extends RequestOfRecord {
  /** What was charged. */
  cost: Micros;
  /** What the hold had reserved. */
  reserved: Micros;
  /** Billing month (UTC, YYYY-MM) of the hold. */
  month: string;
  /** Unix ms of the settlement. */
  time: number;
  /** The entry's id in the account's Redis journal stream, when Redis holds a copy. */
  streamId?: string;
  /** A request refused with 402: the limit that refused it (cost and reserved are 0). */
  refusal?: RefusalReason;
  /** The generation of the Redis copy of the account that applied it (see account-seed.ts). */
  generation?: string;
  /** Once committed: the record's transaction that committed it (xid8 text). */
  recordTx?: string;
}

/** The journal entry of a settlement that was applied (undefined for a duplicate). */
export function journalEntryOf(req: SettlementRequest, outcome: SettlementOutcome): JournalEntry | undefined {
  const mark = outcome.journal;
  if (outcome.duplicate || mark === undefined) return undefined;
  // Every member in one literal, recordTx too (set at commit): conditional spreads after other members
  // take V8's slow path, and a member added later gives every entry a second allocation.
  return {
    requestId: req.requestId,
    accountId: req.accountId,
    keyId: req.keyId,
    model: req.model,
    // A settlement is not changed once made (the queue retries the same one), so its usage is shared.
    usage: req.usage,
    cost: outcome.charged,
    reserved: mark.reserved,
    status: req.status,
    latencyMs: Math.max(0, Math.round(req.latencyMs)),
    month: mark.month,
    time: mark.time,
    streamId: mark.entryId,
    generation: mark.generation,
    recordTx: undefined,
  };
}

/** How many rows a commit added: a repeat of an entry already in PostgreSQL adds none. */
export interface CommitResult {
  records: number;
  charged: Micros;
  /** The record's transaction (xid8 text); '' when there was nothing to commit. */
  recordTx: string;
}

// A text element of a PostgreSQL array literal, always quoted, so no value is read as NULL or split at
// a comma, brace or space; inside quotes only a backslash and a double quote need escaping.
const ESCAPED = /["\\]/g;
function textElement(s: string): string {
  return `"${s.replace(ESCAPED, '\\$&')}"`;
}

/** A bigint element: money and token counts are safe integers, and anything else fails the commit loudly. */
function bigintElement(n: number): string {
  if (!Number.isSafeInteger(n)) throw new RangeError(`a journal entry holds ${n} where an integer belongs`);
  return String(n);
}

/**
 * The batch as one array literal per column (`{"a","b"}`, `{1,2}`), the commit's fifteen parameters.
 * PostgreSQL reads array literals for about 1 µs per record less than the JSON document this replaced
 * (json_to_recordset builds a hash of every object's members), and building them here costs the gateway
 * less than JSON.stringify of the rows did.
 */
export function journalColumns(entries: readonly JournalEntry[]): string[] {
  let r = '', a = '', k = '', m = '', i = '', o = '', ci = '', rs = '', c = '', res = '', st = '', mo = '', t = '', lat = '', rr = '';
  for (let n = 0; n < entries.length; n++) {
    const e = entries[n] as JournalEntry;
    const sep = n === 0 ? '' : ',';
    r += sep + textElement(e.requestId);
    a += sep + textElement(e.accountId);
    k += sep + textElement(e.keyId);
    m += sep + textElement(e.model);
    i += sep + bigintElement(e.usage.input);
    o += sep + bigintElement(e.usage.output);
    ci += sep + bigintElement(e.usage.cachedInput);
    rs += sep + bigintElement(e.usage.reasoning);
    c += sep + bigintElement(e.cost);
    res += sep + bigintElement(e.reserved);
    st += sep + textElement(e.status);
    mo += sep + textElement(e.month);
    t += sep + bigintElement(e.time);
    lat += sep + bigintElement(e.latencyMs);
    rr += sep + (e.refusal === undefined ? 'NULL' : textElement(e.refusal));
  }
  return [r, a, k, m, i, o, ci, rs, c, res, st, mo, t, lat, rr].map((col) => `{${col}}`);
}

// One statement: the placeholder accounts, the usage records, and a 'usage' posting per account for the
// records that were new. The batch travels as one array literal per column (journalColumns): as text,
// because the driver's own serializer for JavaScript arrays was most of the commit's CPU.
const COMMIT_SQL = `
WITH batch AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[],
                       $9::bigint[], $10::bigint[], $11::text[], $12::text[], $13::bigint[], $14::bigint[], $15::text[])
                    AS b(r, a, k, m, i, o, ci, rs, c, res, st, mo, t, lat, rr)
), acct AS (
  -- An account the record has not seen (created in Redis before PostgreSQL was the record) gets a row
  -- named by its id, so its usage and its posting always have an account of record (the posting's
  -- foreign key would otherwise refuse the batch and hold it back forever).
  INSERT INTO accounts (id, name) SELECT DISTINCT a, a FROM batch ORDER BY a ON CONFLICT (id) DO NOTHING
), rec AS (
  INSERT INTO usage_records (request_id, account_id, key_id, model, input_tokens, output_tokens, cached_input_tokens,
                             reasoning_tokens, cost, reserved, status, billing_month, started_at, finished_at,
                             http_status, refusal_reason)
  SELECT r, a, k, m, i, o, ci, rs, c, res, st, mo, to_timestamp((t - lat)::double precision / 1000),
         to_timestamp(t::double precision / 1000), CASE WHEN rr IS NULL THEN NULL ELSE 402 END, rr
    FROM batch ORDER BY a, r
  ON CONFLICT (request_id) DO NOTHING
  RETURNING request_id, account_id, cost
), led AS (
  -- One posting per account: a ledger row per request doubled the record's size and cost for no
  -- figure a statement needs (the requests are listed from usage_records).
  INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key, request_id, memo)
  SELECT account_id, 'usage', -sum(cost), 'usage:' || pg_current_xact_id()::text || ':' || account_id,
         CASE WHEN count(*) = 1 THEN min(request_id) END,
         count(*) || CASE WHEN count(*) = 1 THEN ' request' ELSE ' requests' END
    FROM rec WHERE cost > 0 GROUP BY account_id ORDER BY account_id
  RETURNING amount
)
SELECT (SELECT count(*) FROM rec)::int AS records, COALESCE((SELECT -sum(amount) FROM led), 0)::bigint AS charged,
       pg_current_xact_id()::text AS record_tx`;

/**
 * Commits `entries` in one transaction (one statement). Rows go in account then request order, so two
 * writers committing overlapping batches take the per-account totals rows in the same order (no deadlock).
 */
export async function commitJournal(db: Database, entries: readonly JournalEntry[]): Promise<CommitResult> {
  if (entries.length === 0) return { records: 0, charged: 0, recordTx: '' };
  // No de-duplication here: a request twice in one batch is inserted once (ON CONFLICT DO NOTHING skips
  // the second), and the posting sums only what was inserted.
  // One statement is one transaction of its own: no BEGIN and COMMIT round trips around it.
  const r = await db.query<{ records: number; charged: number; record_tx: string }>(COMMIT_SQL, journalColumns(entries), { prepareAs: 'tollgate_journal_commit' });
  return { records: r.rows[0]?.records ?? 0, charged: r.rows[0]?.charged ?? 0, recordTx: r.rows[0]?.record_tx ?? '' };
}
