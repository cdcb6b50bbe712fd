// An account's statement: its ledger entries (every movement of money: top-ups, credits, usage charges,
// refunds, reversals), newest first, each with the balance right after it. The running balance is
// summed from the account's first entry, so the newest entry's balance equals account_totals.balance
// exactly when the totals trigger and the entries agree (the statement test checks that they do).
import type { Micros } from '../billing/ledger.js';
import type { Queryable, SqlValue } from './database.js';
import type { MovementKind } from './money-movement.js';
import { checkPageSize, UsageQueryError } from './usage-query.js';

export type EntryKind = MovementKind | 'usage';

export interface StatementLine {
  entryId: number;
  kind: EntryKind;
  /** Signed micro-USD: money in > 0, money out < 0. */
  amount: Micros;
  /** Balance right after this entry (entries in id order, from the account's first). */
  balanceAfter: Micros;
  requestId: string | null;
  reference: string | null;
  memo: string | null;
  /** Unix ms. */
  createdAt: number;
  /**
   * The tokens of a usage charge of one request, by price class (each a part of `input`): what its
   * amount was computed from. Absent on other lines, and on a posting of many requests (the Usage page
   * and CSV have each request's).
   */
  tokens?: StatementTokens;
}

export interface StatementTokens {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite5m: number;
  cacheWrite1h: number;
}

export interface StatementPage {
  lines: StatementLine[];
  /** Give it back as `cursor` for the next (older) page; absent on the last page. */
  nextCursor?: string;
}

export interface StatementRequest {
  accountId: string;
  /** The previous page's nextCursor. */
  cursor?: string;
  limit?: number;
}

// The cursor is the last line's entry id; the balance is never taken from it, always summed again.
function decodeCursor(cursor: string): number {
  if (!/^\d{1,18}$/.test(cursor)) throw new UsageQueryError('cursor is not one this API gave out');
  return Number(cursor);
}

interface StatementRow {
  id: number;
  kind: string;
  amount: number;
  request_id: string | null;
  reference: string | null;
  memo: string | null;
  created_ms: number;
  balance_after: number;
  /** The usage record's token columns, for a usage line of one request (else null). */
  input_tokens: number | null;
  output_tokens: number | null;
  cached_input_tokens: number | null;
  cache_write_5m_tokens: number | null;
  cache_write_1h_tokens: number | null;
}

/** One page of the statement, newest entry first. */
export async function statementPage(db: Queryable, req: StatementRequest): Promise<StatementPage> {
  const limit = checkPageSize(req.limit);
  const params: SqlValue[] = [req.accountId, limit + 1];
  let before = '';
  if (req.cursor !== undefined) {
    params.push(decodeCursor(req.cursor));
    before = ' AND id < $3';
  }
  // One statement, one snapshot: the page, and the sum of every entry older than the page's oldest
  // (an index-only scan of ledger_entries_by_account_amount) as the page's opening balance.
  const r = await db.query<StatementRow>(
    `WITH page AS (
       SELECT id, kind, amount, request_id, reference, memo, created_at FROM ledger_entries
        WHERE account_id = $1${before} ORDER BY id DESC LIMIT $2
     ), opening AS (
       SELECT COALESCE(sum(amount), 0)::bigint AS balance FROM ledger_entries
        WHERE account_id = $1 AND id < (SELECT min(id) FROM page)
     )
     SELECT id, kind, amount, p.request_id, reference, memo, (extract(epoch FROM p.created_at) * 1000)::bigint AS created_ms,
            ((SELECT balance FROM opening) + sum(amount) OVER (ORDER BY id))::bigint AS balance_after,
            u.input_tokens, u.output_tokens, u.cached_input_tokens, u.cache_write_5m_tokens, u.cache_write_1h_tokens
       FROM page p LEFT JOIN usage_records u ON p.kind = 'usage' AND u.request_id = p.request_id AND u.account_id = $1
      ORDER BY id DESC`,
    params,
  );
  const rows = r.rows.slice(0, limit);
  const lines = rows.map((row): StatementLine => ({
    entryId: row.id,
    kind: row.kind as EntryKind,
    amount: row.amount,
    balanceAfter: row.balance_after,
    requestId: row.request_id,
    reference: row.reference,
    memo: row.memo,
    createdAt: row.created_ms,
    ...(row.input_tokens === null
      ? {}
      : {
          tokens: {
            input: row.input_tokens,
            output: row.output_tokens ?? 0,
            cacheRead: row.cached_input_tokens ?? 0,
            cacheWrite5m: row.cache_write_5m_tokens ?? 0,
            cacheWrite1h: row.cache_write_1h_tokens ?? 0,
          },
        }),
  }));
  const page: StatementPage = { lines };
  const last = rows[rows.length - 1];
  if (r.rows.length > limit && last !== undefined) page.nextCursor = String(last.id);
  return page;
}
