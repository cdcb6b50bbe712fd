// The Usage page's data: an account's requests of record with filters, one request by id, each key's
// daily spend, and the CSV export (every matching record, whose cost column sums to the usage entries
// of the statement for the same records).
import { Readable } from 'node:stream';
import type { RequestStatus } from '../billing/ledger.js';
import { formatUsd } from '../billing/money.js';
import type { Database } from '../record/database.js';
import { dailyKeySpend, findUsage, listUsagePage, REQUEST_STATUSES, UsageQueryError, type DailyKeySpend, type RecordedUsage, type UsagePage, type UsageFilter } from '../record/usage-query.js';
import { DashboardError } from './errors.js';

export interface UsageQuery {
  keyId?: string;
  model?: string;
  status?: RequestStatus;
  from?: string;
  to?: string;
  /** A request id: that one record, when it is this account's. */
  requestId?: string;
  cursor?: string;
}

/** Whose usage a reader sees: the account's, or (a member) only that of their own keys. */
export interface UsageScope {
  accountId: string;
  /** Undefined: every key of the account. */
  keyIds?: readonly string[];
}

const text = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);

/** The query-string filters of the page, the API and the CSV, checked. */
export function usageQueryOf(q: Record<string, unknown>): UsageQuery {
  const out: UsageQuery = {};
  const keyId = text(q.key);
  const model = text(q.model);
  const status = text(q.status);
  const from = text(q.from);
  const to = text(q.to);
  const requestId = text(q.request_id);
  const cursor = text(q.cursor);
  if (status !== undefined && !(REQUEST_STATUSES as readonly string[]).includes(status)) throw new DashboardError(400, `status must be one of ${REQUEST_STATUSES.join(', ')}.`);
  for (const [name, v] of [['from', from], ['to', to]] as const) if (v !== undefined && !/^\d{4}-\d{2}-\d{2}$/.test(v)) throw new DashboardError(400, `${name} must be a date like 2026-11-01.`);
  if (keyId !== undefined) out.keyId = keyId;
  if (model !== undefined) out.model = model;
  if (status !== undefined) out.status = status as RequestStatus;
  if (from !== undefined) out.from = from;
  if (to !== undefined) out.to = to;
  if (requestId !== undefined) out.requestId = requestId;
  if (cursor !== undefined) out.cursor = cursor;
  return out;
}

function filterOf(scope: UsageScope, q: UsageQuery): UsageFilter {
  return {
    accountId: scope.accountId,
    ...(scope.keyIds === undefined ? {} : { keyIds: scope.keyIds }),
    ...(q.keyId === undefined ? {} : { keyId: q.keyId }),
    ...(q.model === undefined ? {} : { model: q.model }),
    ...(q.status === undefined ? {} : { status: q.status }),
    ...(q.from === undefined ? {} : { from: new Date(`${q.from}T00:00:00Z`) }),
    // "to" is a day, included whole.
    ...(q.to === undefined ? {} : { to: new Date(Date.parse(`${q.to}T00:00:00Z`) + 86_400_000) }),
  };
}

async function checked<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof UsageQueryError) throw new DashboardError(400, err.message);
    throw err;
  }
}

/** One request of the scope by its id, or undefined (another account's, or another member's key's). */
export async function findScopedUsage(db: Database, scope: UsageScope, requestId: string): Promise<RecordedUsage | undefined> {
  const one = await findUsage(db, scope.accountId, requestId);
  return one === undefined || (scope.keyIds !== undefined && !scope.keyIds.includes(one.keyId)) ? undefined : one;
}

export async function usagePage(db: Database, scope: UsageScope, q: UsageQuery, limit = 50): Promise<UsagePage> {
  if (q.requestId !== undefined) {
    const one = await findScopedUsage(db, scope, q.requestId);
    return { records: one === undefined ? [] : [one] };
  }
  return checked(() => listUsagePage(db, { ...filterOf(scope, q), limit, ...(q.cursor === undefined ? {} : { cursor: q.cursor }) }));
}

export function dailySpend(db: Database, scope: UsageScope, days = 30): Promise<DailyKeySpend[]> {
  return checked(() => dailyKeySpend(db, { accountId: scope.accountId, days, ...(scope.keyIds === undefined ? {} : { keyIds: scope.keyIds }) }));
}

/** One CSV cell (the usage and audit log exports). */
export const csvCell = (v: string | number | boolean | null): string => {
  const s = v === null ? '' : String(v);
  // Quoted when needed; a leading = + - @ is prefixed so a spreadsheet never runs it as a formula.
  const safe = /^[=+\-@]/.test(s) ? `'${s}` : s;
  return /[",\n\r]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
};

// Columns added later go at the end, so a reader that takes columns by position keeps working.
const CSV_HEADER = 'finished_at,request_id,key_id,key_name,model,status,finish_reason,refusal_reason,input_tokens,output_tokens,cached_input_tokens,reasoning_tokens,cost_micro_usd,cost_usd,refunded,upstream,http_status,latency_ms,ttft_ms,model_refused,cache_write_5m_tokens,cache_write_1h_tokens';

/**
 * Every matching record as CSV (all pages), newest first, with a total row, as a stream: a page of
 * 1,000 records is read when the client has taken what came before (at most one page ahead), so an
 * export of any size holds a page or two in memory. The first page is read before the stream is
 * returned, so a bad filter is still a 400, not a cut-off download. `keyIds`: only these keys' records.
 */
export async function usageCsvStream(db: Database, accountId: string, q: UsageQuery, keyNames: Map<string, string>, keyIds?: readonly string[]): Promise<Readable> {
  const scope: UsageScope = { accountId, ...(keyIds === undefined ? {} : { keyIds }) };
  const read = (cursor: string | undefined) => checked(() => listUsagePage(db, { ...filterOf(scope, q), limit: 1000, ...(cursor === undefined ? {} : { cursor }) }));
  const first = await read(undefined);
  async function* lines(): AsyncGenerator<string> {
    yield `${CSV_HEADER}\r\n`;
    let total = 0;
    let page = first;
    for (;;) {
      let chunk = '';
      for (const r of page.records) {
        total += r.cost;
        chunk += `${[new Date(r.finishedAt).toISOString(), r.requestId, r.keyId, keyNames.get(r.keyId) ?? '', r.model, r.status, r.finishReason, r.refusalReason, r.usage.input, r.usage.output, r.usage.cachedInput, r.usage.reasoning, r.cost, formatUsd(r.cost), r.refunded, r.upstream, r.httpStatus, r.latencyMs, r.ttftMs, r.modelRefused, r.usage.cacheWrite5m ?? 0, r.usage.cacheWrite1h ?? 0].map(csvCell).join(',')}\r\n`;
      }
      if (chunk !== '') yield chunk;
      if (page.nextCursor === undefined) break;
      page = await read(page.nextCursor);
    }
    yield `${['total', '', '', '', '', '', '', '', '', '', '', '', total, formatUsd(total), '', '', '', '', '', '', '', ''].map(csvCell).join(',')}\r\n`;
  }
  // Bytes, not objects, with a small buffer: a page is not read until the one before has been taken.
  return Readable.from(lines(), { objectMode: false, highWaterMark: 16 * 1024 });
}
