// Usage of record, read from PostgreSQL: one account's usage records (optionally one key's, one model's,
// one status, a time range), newest first, paged by a keyset cursor; and each key's spend per day. The
// admin API and the dashboard both read usage through this module. No cap on how far back a page goes:
// the cursor is the last row's (finished_at, request_id), so page 1,000 costs what page 1 does.
import type { Micros, RefusalReason, RequestStatus, UsageRecord } from '../billing/ledger.js';
import type { Queryable, SqlValue } from './database.js';
import { cacheWrites } from '../billing/money.js';

export const REQUEST_STATUSES: readonly RequestStatus[] = ['completed', 'client_cancelled', 'upstream_failed', 'refused', 'timed_out', 'shutdown_cut'];
export const DEFAULT_PAGE_SIZE = 100;
export const MAX_PAGE_SIZE = 1_000;

export interface UsageFilter {
  accountId: string;
  keyId?: string;
  /** Only these keys' records (a member sees their own keys' usage); an empty list matches nothing. */
  keyIds?: readonly string[];
  model?: string;
  status?: RequestStatus;
  /** Only requests charged to this team (usage_records.team_id: the key's team when it was reserved). */
  teamId?: string;
  /** Finished at or after (inclusive). */
  from?: Date;
  /** Finished before (exclusive). */
  to?: Date;
}

export interface UsagePageRequest extends UsageFilter {
  /** The previous page's nextCursor; absent for the newest page. */
  cursor?: string;
  /** Rows per page, 1 to MAX_PAGE_SIZE (default DEFAULT_PAGE_SIZE). */
  limit?: number;
}

/** A usage record of record: the hot path's UsageRecord plus what only PostgreSQL keeps. */
export interface RecordedUsage extends UsageRecord {
  upstream: string | null;
  /** What the hold had reserved. */
  reserved: Micros;
  httpStatus: number | null;
  finishReason: string | null;
  /** Set on a request refused with 402: the limit that refused it. */
  refusalReason: RefusalReason | null;
  modelRefused: boolean;
  /** Milliseconds to the first token the client was sent (streams); null when not measured. */
  ttftMs: number | null;
  /** The calendar month (UTC, YYYY-MM) whose cap the charge counts against. */
  billingMonth: string;
  /** Unix ms. */
  startedAt: number;
  /** Unix ms; `time` is the same instant. */
  finishedAt: number;
  refunded: boolean;
  /** Unix ms of the refund, when there was one. */
  refundedAt: number | null;
}

export interface UsagePage {
  records: RecordedUsage[];
  /** Give it back as `cursor` for the next (older) page; absent on the last page. */
  nextCursor?: string;
}

/** A cursor, limit or filter that cannot be used: the caller's mistake (a 400), never a 500. */
export class UsageQueryError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageQueryError';
  }
}

interface Position {
  /** finished_at in microseconds since the epoch, as text (exact; PostgreSQL keeps microseconds). */
  micros: string;
  requestId: string;
}

/** An opaque cursor: base64url of the last row's position. It carries no money, only where to resume. */
function encodeCursor(p: Position): string {
  return Buffer.from(JSON.stringify([p.micros, p.requestId])).toString('base64url');
}

function decodeCursor(cursor: string): Position {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    throw new UsageQueryError('cursor is not one this API gave out');
  }
  if (!Array.isArray(parsed) || parsed.length !== 2) throw new UsageQueryError('cursor is not one this API gave out');
  const [micros, requestId] = parsed as unknown[];
  if (typeof micros !== 'string' || !/^-?\d{1,19}$/.test(micros) || typeof requestId !== 'string') throw new UsageQueryError('cursor is not one this API gave out');
  return { micros, requestId };
}

export function checkPageSize(limit: number | undefined): number {
  const n = limit ?? DEFAULT_PAGE_SIZE;
  if (!Number.isSafeInteger(n) || n < 1 || n > MAX_PAGE_SIZE) throw new UsageQueryError(`limit must be an integer from 1 to ${MAX_PAGE_SIZE}`);
  return n;
}

interface UsageRow {
  request_id: string;
  account_id: string;
  key_id: string;
  model: string;
  upstream: string | null;
  input_tokens: number;
  output_tokens: number;
  cached_input_tokens: number;
  cache_write_5m_tokens: number;
  cache_write_1h_tokens: number;
  reasoning_tokens: number;
  cost: number;
  reserved: number;
  status: string;
  http_status: number | null;
  finish_reason: string | null;
  refusal_reason: string | null;
  model_refused: boolean;
  ttft_ms: number | null;
  billing_month: string;
  started_us: string;
  finished_us: string;
  refunded_us: string | null;
  team_id: string | null;
}

const usToMs = (us: string): number => Math.floor(Number(us) / 1000);

function toRecord(r: UsageRow): RecordedUsage {
  const startedAt = usToMs(r.started_us);
  const finishedAt = usToMs(r.finished_us);
  return {
    requestId: r.request_id,
    accountId: r.account_id,
    keyId: r.key_id,
    model: r.model,
    usage: {
      input: r.input_tokens,
      output: r.output_tokens,
      cachedInput: r.cached_input_tokens,
      reasoning: r.reasoning_tokens,
      ...cacheWrites(r.cache_write_5m_tokens, r.cache_write_1h_tokens),
    },
    cost: r.cost,
    status: r.status as RequestStatus,
    latencyMs: Math.max(0, finishedAt - startedAt),
    time: finishedAt,
    upstream: r.upstream,
    reserved: r.reserved,
    httpStatus: r.http_status,
    finishReason: r.finish_reason,
    refusalReason: r.refusal_reason as RefusalReason | null,
    modelRefused: r.model_refused,
    ttftMs: r.ttft_ms,
    billingMonth: r.billing_month,
    startedAt,
    finishedAt,
    refunded: r.refunded_us !== null,
    refundedAt: r.refunded_us === null ? null : usToMs(r.refunded_us),
    ...(r.team_id === null ? {} : { teamId: r.team_id }),
  };
}

/** Microseconds since the epoch as exact text (extract gives numeric since PostgreSQL 14). */
const micros = (column: string): string => `(extract(epoch FROM ${column}) * 1000000)::bigint::text`;
const fromMicros = (param: string): string => `(timestamptz 'epoch' + ${param}::bigint * interval '1 microsecond')`;

const USAGE_COLUMNS = `request_id, account_id, key_id, model, upstream, input_tokens, output_tokens, cached_input_tokens,
  cache_write_5m_tokens, cache_write_1h_tokens, reasoning_tokens, cost, reserved, status, http_status, finish_reason, refusal_reason, model_refused, ttft_ms, billing_month,
  ${micros('started_at')} AS started_us, ${micros('finished_at')} AS finished_us, ${micros('refunded_at')} AS refunded_us, team_id`;

/** The WHERE clause of a filter (account first) and its parameters; more can be pushed after them. */
export function usageWhere(filter: UsageFilter): { where: string[]; params: SqlValue[] } {
  if (filter.status !== undefined && !REQUEST_STATUSES.includes(filter.status)) throw new UsageQueryError(`status must be one of ${REQUEST_STATUSES.join(', ')}`);
  const params: SqlValue[] = [filter.accountId];
  const where = ['account_id = $1'];
  const add = (sql: (p: string) => string, value: SqlValue): void => {
    params.push(value);
    where.push(sql(`$${params.length}`));
  };
  // With a key the key's index leads (it holds only that key's rows); the account test keeps it scoped.
  if (filter.keyId !== undefined) add((p) => `key_id = ${p}`, filter.keyId);
  if (filter.keyIds !== undefined) add((p) => `key_id = ANY(${p})`, filter.keyIds);
  if (filter.teamId !== undefined) add((p) => `team_id = ${p}`, filter.teamId);
  if (filter.model !== undefined) add((p) => `model = ${p}`, filter.model);
  if (filter.status !== undefined) add((p) => `status = ${p}`, filter.status);
  if (filter.from !== undefined) add((p) => `finished_at >= ${p}`, filter.from);
  if (filter.to !== undefined) add((p) => `finished_at < ${p}`, filter.to);
  return { where, params };
}

/** One page of an account's usage, newest first. */
export async function listUsagePage(db: Queryable, req: UsagePageRequest): Promise<UsagePage> {
  const limit = checkPageSize(req.limit);
  const { where, params } = usageWhere(req);
  if (req.cursor !== undefined) {
    const at = decodeCursor(req.cursor);
    params.push(at.micros, at.requestId);
    where.push(`(finished_at, request_id) < (${fromMicros(`$${params.length - 1}`)}, $${params.length})`);
  }
  // One row more than the page tells whether another page follows.
  params.push(limit + 1);
  const r = await db.query<UsageRow>(
    `SELECT ${USAGE_COLUMNS} FROM usage_records WHERE ${where.join(' AND ')}
     ORDER BY finished_at DESC, request_id DESC LIMIT $${params.length}`,
    params,
  );
  const rows = r.rows.slice(0, limit);
  const last = rows[rows.length - 1];
  const page: UsagePage = { records: rows.map(toRecord) };
  if (r.rows.length > limit && last !== undefined) page.nextCursor = encodeCursor({ micros: last.finished_us, requestId: last.request_id });
  return page;
}

/** One request's usage record on one account, or undefined (another account's request is not found). */
export async function findUsage(db: Queryable, accountId: string, requestId: string): Promise<RecordedUsage | undefined> {
  const r = await db.query<UsageRow>(`SELECT ${USAGE_COLUMNS} FROM usage_records WHERE request_id = $1 AND account_id = $2`, [requestId, accountId]);
  const row = r.rows[0];
  return row === undefined ? undefined : toRecord(row);
}

export interface DailyKeySpend {
  keyId: string;
  /** UTC calendar day, YYYY-MM-DD. */
  day: string;
  /** Micro-USD charged that day. */
  spent: Micros;
  /** Requests that finished that day (refusals included). */
  requests: number;
}

export const MAX_SPEND_DAYS = 366;

/**
 * Each key's spend per UTC day over the last `days` days (today included), oldest day first; days on
 * which a key had no request are absent. A refund does not lower the day's spend (the key did spend).
 */
export async function dailyKeySpend(db: Queryable, opts: { accountId: string; days: number; keyId?: string; keyIds?: readonly string[]; now?: Date }): Promise<DailyKeySpend[]> {
  if (!Number.isSafeInteger(opts.days) || opts.days < 1 || opts.days > MAX_SPEND_DAYS) throw new UsageQueryError(`days must be an integer from 1 to ${MAX_SPEND_DAYS}`);
  const now = opts.now ?? new Date();
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  const from = new Date(today - (opts.days - 1) * 86_400_000);
  const until = new Date(today + 86_400_000);
  const params: SqlValue[] = [opts.accountId, from, until];
  let keyClause = '';
  if (opts.keyId !== undefined) {
    params.push(opts.keyId);
    keyClause = ' AND key_id = $4';
  }
  if (opts.keyIds !== undefined) {
    params.push(opts.keyIds);
    keyClause += ` AND key_id = ANY($${params.length})`;
  }
  const r = await db.query<{ key_id: string; day: string; spent: number; requests: number }>(
    `SELECT key_id, to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, sum(cost)::bigint AS spent, count(*)::int AS requests
       FROM usage_records WHERE account_id = $1 AND finished_at >= $2 AND finished_at < $3${keyClause}
      GROUP BY 1, 2 ORDER BY 2, 1`,
    params,
  );
  return r.rows.map((row) => ({ keyId: row.key_id, day: row.day, spent: row.spent, requests: row.requests }));
}

/** A key's charges since two instants (the start of the UTC day and of the UTC week), from the record. */
export async function keySpendSince(db: Queryable, opts: { accountId: string; keyId: string; day: Date; week: Date }): Promise<{ day: Micros; week: Micros }> {
  const since = opts.week < opts.day ? opts.week : opts.day;
  const r = await db.query<{ day: string | number; week: string | number }>(
    `SELECT coalesce(sum(cost) FILTER (WHERE finished_at >= $3), 0)::bigint AS day, coalesce(sum(cost) FILTER (WHERE finished_at >= $4), 0)::bigint AS week
       FROM usage_records WHERE key_id = $2 AND account_id = $1 AND finished_at >= $5`,
    [opts.accountId, opts.keyId, opts.day, opts.week, since],
  );
  return { day: Number(r.rows[0]?.day ?? 0), week: Number(r.rows[0]?.week ?? 0) };
}
