// The journal's commit: settlements the hot path applied, written to PostgreSQL once each. A usage
// record and (when something was charged) its 'usage' ledger entry go in one transaction, both keyed so
// that a repeat (two writers, a retry after a lost COMMIT reply, a sweep of a dead pod's stream) is a
// no-op: usage_records by request id, ledger_entries by `usage:<requestId>`.
import type { Micros, RefusalReason, RequestStatus, SettlementOutcome, SettlementRequest, TokenUsage } from '../billing/ledger.js';
import type { Database } from './database.js';

export interface JournalEntry {
  requestId: string;
  accountId: string;
  keyId: string;
  model: string;
  usage: TokenUsage;
  /** What was charged. */
  cost: Micros;
  /** What the hold had reserved. */
  reserved: Micros;
  status: RequestStatus;
  latencyMs: number;
  /** Billing month (UTC, YYYY-MM) of the hold. */
  month: string;
  /** Unix ms of the settlement. */
  time: number;
  /** The entry's id in the account's Redis journal stream, when Redis holds a copy. */
  streamId?: string;
  /** A request refused with 402: the limit that refused it (cost and reserved are 0). */
  refusal?: RefusalReason;
}

/** The journal entry of a settlement that was applied (undefined for a duplicate). */
export function journalEntryOf(req: SettlementRequest, outcome: SettlementOutcome): JournalEntry | undefined {
  const mark = outcome.journal;
  if (outcome.duplicate || mark === undefined) return undefined;
  return {
    requestId: req.requestId,
    accountId: req.accountId,
    keyId: req.keyId,
    model: req.model,
    usage: { ...req.usage },
    cost: outcome.charged,
    reserved: mark.reserved,
    status: req.status,
    latencyMs: Math.max(0, Math.round(req.latencyMs)),
    month: mark.month,
    time: mark.time,
    ...(mark.entryId === undefined ? {} : { streamId: mark.entryId }),
  };
}

/** How many rows a commit added: a repeat of an entry already in PostgreSQL adds none. */
export interface CommitResult {
  records: number;
  charged: Micros;
}

/**
 * Commits `entries` in one transaction. Rows go in account then request order, so two writers
 * committing overlapping batches take the per-account totals rows in the same order (no deadlock).
 */
export async function commitJournal(db: Database, entries: readonly JournalEntry[]): Promise<CommitResult> {
  const unique = new Map<string, JournalEntry>();
  for (const e of entries) unique.set(e.requestId, e);
  const rows = [...unique.values()].sort((a, b) =>
    a.accountId === b.accountId ? (a.requestId < b.requestId ? -1 : 1) : a.accountId < b.accountId ? -1 : 1,
  );
  if (rows.length === 0) return { records: 0, charged: 0 };
  const col = <T>(f: (e: JournalEntry) => T): T[] => rows.map(f);
  return db.transaction(async (tx) => {
    // An account the record has not seen (created in Redis before PostgreSQL was the record) gets a row
    // named by its id, so its usage is never refused by the foreign key and held back forever.
    await tx.query(
      `INSERT INTO accounts (id, name) SELECT a, a FROM unnest($1::text[]) AS a ORDER BY a ON CONFLICT (id) DO NOTHING`,
      [[...new Set(col((e) => e.accountId))]],
    );
    const inserted = await tx.query<{ request_id: string; account_id: string; cost: number }>(
      `INSERT INTO usage_records (request_id, account_id, key_id, model, input_tokens, output_tokens,
         cached_input_tokens, reasoning_tokens, cost, reserved, status, billing_month, started_at, finished_at,
         http_status, refusal_reason)
       SELECT r, a, k, m, i, o, ci, rs, c, res, st, mo,
              to_timestamp((t - lat)::double precision / 1000), to_timestamp(t::double precision / 1000),
              CASE WHEN rr = '' THEN NULL ELSE 402 END, NULLIF(rr, '')
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[],
                     $8::bigint[], $9::bigint[], $10::bigint[], $11::text[], $12::text[], $13::bigint[], $14::bigint[], $15::text[])
              AS u(r, a, k, m, i, o, ci, rs, c, res, st, mo, t, lat, rr)
       ON CONFLICT (request_id) DO NOTHING
       RETURNING request_id, account_id, cost`,
      [
        col((e) => e.requestId),
        col((e) => e.accountId),
        col((e) => e.keyId),
        col((e) => e.model),
        col((e) => e.usage.input),
        col((e) => e.usage.output),
        col((e) => e.usage.cachedInput),
        col((e) => e.usage.reasoning),
        col((e) => e.cost),
        col((e) => e.reserved),
        col((e) => e.status),
        col((e) => e.month),
        col((e) => e.time),
        col((e) => e.latencyMs),
        col((e) => e.refusal ?? ''),
      ],
    );
    const charged = inserted.rows.filter((r) => r.cost > 0).sort((a, b) => (a.account_id === b.account_id ? 0 : a.account_id < b.account_id ? -1 : 1));
    if (charged.length > 0) {
      await tx.query(
        `INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key, request_id)
         SELECT a, 'usage', -c, 'usage:' || r, r FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(r, a, c)
         ON CONFLICT (idempotency_key) DO NOTHING`,
        [charged.map((r) => r.request_id), charged.map((r) => r.account_id), charged.map((r) => r.cost)],
      );
    }
    return { records: inserted.rows.length, charged: charged.reduce((sum, r) => sum + r.cost, 0) };
  });
}
