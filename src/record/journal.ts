// The journal's commit: settlements the hot path applied, written to PostgreSQL once each. The usage
// records, and one 'usage' ledger posting per account for what those records charged, go in one
// transaction. The records are keyed by request id, so a repeat (two writers, a retry after a lost
// COMMIT reply, a sweep of a dead pod's stream) inserts none and its posting sums nothing: a record and
// its share of a posting exist together or not at all. A posting's idempotency key names the
// transaction that wrote it (`usage:<xid>:<account>`); a posting of one record also names its request.
//
// Two ways in. A batch of new requests, nearly every batch, is loaded with COPY (loadJournal): a third
// less of PostgreSQL's CPU per record, which the gateway's throughput feels where they share a machine.
// COPY cannot skip a row that is already there, so a batch that repeats any request fails as a whole
// and is merged instead (mergeJournal: INSERT ... ON CONFLICT DO NOTHING, which adds only the new ones).
import type { Micros, RefusalReason, RequestOfRecord, SettlementOutcome, SettlementRequest } from '../billing/ledger.js';
import type { Database, Transaction } from './database.js';

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
  /** The account's seq in Redis after this settlement (lua/common.lua): the record keeps the highest. */
  seq?: number;
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
    // Charged to this team's budgets (a key changes team; its earlier requests stay with the team they were charged to).
    teamId: req.teamId,
    memberId: req.memberId,
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
    seq: mark.seq,
    detail: req.detail,
  };
}

/** How many rows a commit added: a repeat of an entry already in PostgreSQL adds none. */
export interface CommitResult {
  records: number;
  charged: Micros;
  /** The record's transaction (xid8 text); '' when there was nothing to commit. */
  recordTx: string;
  /** The batch repeated a request already of record, so it was merged rather than loaded. */
  merged: boolean;
  /**
   * For a merge: the charged requests this commit added. The others were of record before, committed by
   * another transaction, whose writer applies them to a reloaded Redis where its seed missed them; this
   * commit's transaction id says nothing about them (see JournalWriter: their recordTx is '0').
   */
  added?: ReadonlySet<string>;
}

// A text element of a PostgreSQL array literal, always quoted, so no value is read as NULL or split at
// a comma, brace or space; inside quotes only a backslash and a double quote need escaping.
const ESCAPED = /["\\]/g;
function textElement(s: string): string {
  return `"${s.replace(ESCAPED, '\\$&')}"`;
}

/** Money, token counts and times are safe integers; anything else fails the commit loudly. */
function safeInteger(n: number): number {
  if (!Number.isSafeInteger(n)) throw new RangeError(`a journal entry holds ${n} where an integer belongs`);
  return n;
}

/** A bigint element of an array literal. */
function bigintElement(n: number): string {
  return String(safeInteger(n));
}

/**
 * The batch as one array literal per column (`{"a","b"}`, `{1,2}`), the commit's parameters.
 * PostgreSQL reads array literals for about 1 µs per record less than the JSON document this replaced
 * (json_to_recordset builds a hash of every object's members), and building them here costs the gateway
 * less than JSON.stringify of the rows did.
 */
export function journalColumns(entries: readonly JournalEntry[]): string[] {
  let r = '', a = '', k = '', m = '', i = '', o = '', ci = '', rs = '', c = '', res = '', st = '', mo = '', t = '', lat = '', rr = '';
  let hs = '', fr = '', up = '', mr = '', tf = '', w5 = '', w1 = '', tm = '';
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
    w5 += sep + bigintElement(e.usage.cacheWrite5m ?? 0);
    w1 += sep + bigintElement(e.usage.cacheWrite1h ?? 0);
    c += sep + bigintElement(e.cost);
    res += sep + bigintElement(e.reserved);
    st += sep + textElement(e.status);
    mo += sep + textElement(e.month);
    t += sep + bigintElement(e.time);
    lat += sep + bigintElement(e.latencyMs);
    rr += sep + (e.refusal === undefined ? 'NULL' : textElement(e.refusal));
    const d = e.detail;
    const status = e.refusal !== undefined ? 402 : d?.httpStatus;
    hs += sep + (status === undefined ? 'NULL' : bigintElement(status));
    fr += sep + (d?.finishReason === undefined ? 'NULL' : textElement(d.finishReason));
    up += sep + (d?.upstream === undefined ? 'NULL' : textElement(d.upstream));
    mr += sep + (d?.modelRefused === true ? 't' : 'f');
    tf += sep + (d?.ttftMs === undefined ? 'NULL' : bigintElement(d.ttftMs));
    tm += sep + (e.teamId === undefined || e.teamId === '' ? 'NULL' : textElement(e.teamId));
  }
  return [r, a, k, m, i, o, ci, rs, c, res, st, mo, t, lat, rr, hs, fr, up, mr, tf, w5, w1, tm].map((col) => `{${col}}`);
}

// The merge's usage insert: the batch travels as one array literal per column (journalColumns), as
// text, because the driver's own serializer for JavaScript arrays was most of the statement's CPU. Rows
// go in the batch's order (WITH ORDINALITY), the request order COPY takes them in. What it returns is
// what was new, per account: the postings are made of it.
const MERGE_SQL = `
WITH batch AS (
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[],
                       $9::bigint[], $10::bigint[], $11::text[], $12::text[], $13::bigint[], $14::bigint[], $15::text[],
                       $16::integer[], $17::text[], $18::text[], $19::boolean[], $20::integer[], $21::bigint[], $22::bigint[], $23::text[])
                  WITH ORDINALITY AS b(r, a, k, m, i, o, ci, rs, c, res, st, mo, t, lat, rr, hs, fr, up, mr, tf, w5, w1, tm, ord)
), rec AS (
  INSERT INTO usage_records (request_id, account_id, key_id, model, input_tokens, output_tokens, cached_input_tokens,
                             reasoning_tokens, cost, reserved, status, billing_month, started_at, finished_at,
                             http_status, refusal_reason, finish_reason, upstream, model_refused, ttft_ms,
                             cache_write_5m_tokens, cache_write_1h_tokens, team_id)
  SELECT r, a, k, m, i, o, ci, rs, c, res, st, mo, to_timestamp((t - lat)::double precision / 1000),
         to_timestamp(t::double precision / 1000), hs, rr, fr, up, mr, tf, w5, w1, tm
    FROM batch ORDER BY ord
  ON CONFLICT (request_id) DO NOTHING
  RETURNING request_id, account_id, cost
)
SELECT account_id AS account, count(*)::int AS records, COALESCE(sum(cost) FILTER (WHERE cost > 0), 0)::bigint AS amount,
       count(*) FILTER (WHERE cost > 0)::int AS requests, min(request_id) FILTER (WHERE cost > 0) AS first_request,
       COALESCE(array_agg(request_id) FILTER (WHERE cost > 0), '{}') AS added
  FROM rec GROUP BY account_id`;

// COPY's text format: a tab between fields, a newline after a row, \N for NULL; inside a field only a
// backslash, tab, newline and carriage return need escaping (so no field can read as the end marker).
// Most fields have none of them, and a test is a quarter of the price of a replace that finds nothing.
const COPY_SPECIAL = /[\\\t\n\r]/;
const COPY_SPECIALS = /[\\\t\n\r]/g;
const COPY_ESCAPE: Readonly<Record<string, string>> = { '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' };
function copyField(s: string): string {
  return COPY_SPECIAL.test(s) ? s.replace(COPY_SPECIALS, (c) => COPY_ESCAPE[c] ?? c) : s;
}

/** Six fields of the row: HTTP status, refusal reason, finish reason, upstream, model refused, time to first token. */
function copyDetail(e: JournalEntry): string {
  if (e.refusal !== undefined) return `402\t${copyField(e.refusal)}\t\\N\t\\N\tf\t\\N`;
  const d = e.detail;
  if (d === undefined) return '\\N\t\\N\t\\N\t\\N\tf\t\\N';
  return (
    `${d.httpStatus === undefined ? '\\N' : safeInteger(d.httpStatus)}\t\\N\t${d.finishReason === undefined ? '\\N' : copyField(d.finishReason)}\t` +
    `${d.upstream === undefined ? '\\N' : copyField(d.upstream)}\t${d.modelRefused === true ? 't' : 'f'}\t${d.ttftMs === undefined ? '\\N' : safeInteger(d.ttftMs)}`
  );
}

/**
 * Unix ms as an ISO 8601 UTC timestamp (`2026-11-20T00:00:01.500Z`), the date and time of day formatted
 * once per second: a batch's times fall in a second or two, and Date#toISOString twice a record was
 * half the cost of building the batch.
 */
function utcTimestamps(): (ms: number) => string {
  let second = NaN;
  let prefix = '';
  return (ms) => {
    const s = Math.floor(ms / 1000);
    if (s !== second) {
      second = s;
      prefix = new Date(s * 1000).toISOString().slice(0, -5);
    }
    const frac = ms - s * 1000;
    return `${prefix}.${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}Z`;
  };
}

/** One account's share of a batch: the 'usage' posting for its charged records. */
interface Posting {
  account: string;
  amount: Micros;
  requests: number;
  /** The request, when the posting is of one. */
  requestId: string | null;
}

export interface JournalLoad {
  /** The batch in request order. */
  entries: JournalEntry[];
  /** Its usage records in COPY's text format, in that order. */
  rows: string;
  /** Every account of the batch, in order (placeholders for any the record has not seen). */
  accounts: string[];
  /** The highest Redis seq of each of `accounts` in the batch (0 when none carries one). */
  seqs: number[];
  /** The postings, one per account with a charge, in account order. */
  postings: Posting[];
  charged: Micros;
}

/** Code-unit order, the same as Array#sort's default, so every sort of the journal agrees. */
const byText = (x: string, y: string): number => (x < y ? -1 : x > y ? 1 : 0);

/**
 * The batch as COPY rows and per-account postings. Rows go in request order, so two writers loading
 * overlapping batches meet their first common request in the same order (one waits for the other;
 * neither holds a request the other needs). Request ids begin with their time, so a batch comes nearly
 * sorted. Throws on a number that is not a safe integer.
 */
export function journalLoad(entries: readonly JournalEntry[]): JournalLoad {
  const sorted = [...entries].sort((x, y) => byText(x.requestId, y.requestId));
  const shares = new Map<string, Posting>();
  const seqOf = new Map<string, number>();
  const finishedAt = utcTimestamps();
  const startedAt = utcTimestamps();
  let rows = '';
  let charged = 0;
  for (const e of sorted) {
    let share = shares.get(e.accountId);
    if (share === undefined) {
      share = { account: e.accountId, amount: 0, requests: 0, requestId: null };
      shares.set(e.accountId, share);
    }
    if (e.seq !== undefined && e.seq > (seqOf.get(e.accountId) ?? 0)) seqOf.set(e.accountId, e.seq);
    const cost = safeInteger(e.cost);
    const finished = safeInteger(e.time);
    const started = finished - safeInteger(e.latencyMs);
    if (cost > 0) {
      share.amount += cost;
      share.requests++;
      share.requestId = e.requestId;
      charged += cost;
    }
    rows +=
      `${copyField(e.requestId)}\t${copyField(e.accountId)}\t${copyField(e.keyId)}\t${copyField(e.model)}\t` +
      `${safeInteger(e.usage.input)}\t${safeInteger(e.usage.output)}\t${safeInteger(e.usage.cachedInput)}\t${safeInteger(e.usage.reasoning)}\t` +
      `${cost}\t${safeInteger(e.reserved)}\t${copyField(e.status)}\t${copyField(e.month)}\t${startedAt(started)}\t${finishedAt(finished)}\t` +
      `${copyDetail(e)}\t${safeInteger(e.usage.cacheWrite5m ?? 0)}\t${safeInteger(e.usage.cacheWrite1h ?? 0)}\t` +
      `${e.teamId === undefined || e.teamId === '' ? '\\N' : copyField(e.teamId)}\n`;
  }
  const accounts = [...shares.keys()].sort(byText);
  const postings: Posting[] = [];
  for (const account of accounts) {
    const share = shares.get(account) as Posting;
    if (share.requests === 0) continue;
    if (share.requests > 1) share.requestId = null;
    postings.push(share);
  }
  if (!Number.isSafeInteger(charged)) throw new RangeError(`a journal batch charges ${charged}, past the largest exact integer`);
  const seqs = accounts.map((a) => seqOf.get(a) ?? 0);
  return { entries: sorted, rows, accounts, seqs, postings, charged };
}

const USAGE_COPY_TARGET =
  'usage_records (request_id, account_id, key_id, model, input_tokens, output_tokens, cached_input_tokens, reasoning_tokens, ' +
  'cost, reserved, status, billing_month, started_at, finished_at, http_status, refusal_reason, finish_reason, upstream, model_refused, ttft_ms, ' +
  'cache_write_5m_tokens, cache_write_1h_tokens, team_id)';

// One statement after the usage records: a placeholder row for any account of the batch the record
// has not seen (created in Redis before PostgreSQL was the record), so its usage and its posting always
// have an account of record (the posting's foreign key, checked at the statement's end, would otherwise
// refuse the batch and hold it back forever); then one posting per account with a charge (a ledger row
// per request doubled the record's size and cost for no figure a statement needs: the requests are
// listed from usage_records).
const POSTINGS_SQL = `
WITH acct AS (
  INSERT INTO accounts (id, name) SELECT a, a FROM unnest($5::text[]) WITH ORDINALITY AS p(a, ord) ORDER BY ord ON CONFLICT (id) DO NOTHING
), led AS (
  INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key, request_id, memo)
  SELECT a, 'usage', -s, 'usage:' || pg_current_xact_id()::text || ':' || a, r, n || CASE WHEN n = 1 THEN ' request' ELSE ' requests' END
    FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[]) WITH ORDINALITY AS p(a, s, n, r, ord) ORDER BY ord
), seq AS (
  INSERT INTO account_hot_seq (account_id, seq)
  SELECT a, q FROM unnest($5::text[], $6::bigint[]) WITH ORDINALITY AS p(a, q, ord) WHERE q > 0 ORDER BY ord
  ON CONFLICT (account_id) DO UPDATE SET seq = GREATEST(account_hot_seq.seq, EXCLUDED.seq)
)
SELECT pg_current_xact_id()::text AS record_tx`;

/**
 * Writes the accounts and postings and returns the transaction's id. Both ways in run the same steps in
 * the same order (usage records and with them the key-spend trigger, then accounts, postings and the
 * account totals), each step in request, key or account order, so two writers that meet on a request
 * always want what they share in the same order: one waits for the other, never both.
 */
async function post(tx: Transaction, accounts: readonly string[], postings: readonly Posting[], seqs: readonly number[]): Promise<string> {
  const r = await tx.query<{ record_tx: string }>(
    POSTINGS_SQL,
    [postings.map((p) => p.account), postings.map((p) => p.amount), postings.map((p) => p.requests), postings.map((p) => p.requestId), accounts, seqs],
    { prepareAs: 'tollgate_journal_postings' },
  );
  return r.rows[0]?.record_tx ?? '';
}

/** Loads a batch of new requests with COPY; fails (23505) if any of them is already of record. */
async function loadJournal(tx: Transaction, load: JournalLoad): Promise<CommitResult> {
  await tx.copyIn(USAGE_COPY_TARGET, load.rows);
  const recordTx = await post(tx, load.accounts, load.postings, load.seqs);
  return { records: load.entries.length, charged: load.charged, recordTx, merged: false };
}

/** Adds what of a batch is new: the way in for a batch that repeats a request. */
async function mergeJournal(tx: Transaction, load: JournalLoad): Promise<CommitResult> {
  // A request twice in one batch is inserted once (ON CONFLICT DO NOTHING skips the second).
  const added = await tx.query<{ account: string; records: number; amount: number; requests: number; first_request: string | null; added: string[] }>(
    MERGE_SQL,
    journalColumns(load.entries),
    { prepareAs: 'tollgate_journal_merge' },
  );
  const rows = added.rows.sort((x, y) => byText(x.account, y.account));
  const postings = rows.filter((r) => r.requests > 0).map((r) => ({ account: r.account, amount: r.amount, requests: r.requests, requestId: r.requests === 1 ? r.first_request : null }));
  const recordTx = await post(tx, load.accounts, postings, load.seqs);
  return {
    records: rows.reduce((n, r) => n + r.records, 0),
    charged: postings.reduce((n, p) => n + p.amount, 0),
    recordTx,
    merged: true,
    added: new Set(rows.flatMap((r) => r.added)),
  };
}

const isUniqueViolation = (err: unknown): boolean => typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';

/**
 * Commits `entries` in one transaction: loaded with COPY when all are new, else merged (a retry after a
 * lost reply, a sweep that met what its owner committed, two writers racing). Either way each request
 * is of record once and each account's posting sums exactly what was added.
 */
export async function commitJournal(db: Database, entries: readonly JournalEntry[]): Promise<CommitResult> {
  if (entries.length === 0) return { records: 0, charged: 0, recordTx: '', merged: false };
  const load = journalLoad(entries);
  try {
    return await db.transaction((tx) => loadJournal(tx, load));
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
  }
  return db.transaction((tx) => mergeJournal(tx, load));
}
