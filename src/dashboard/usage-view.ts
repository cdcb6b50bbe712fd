// The Usage page's data: an account's requests of record with filters, one request by id, each key's
// daily spend, and the CSV export (every matching record, whose cost column sums to the usage entries
// of the statement for the same records).
import { Readable } from 'node:stream';
import type { RequestStatus } from '../billing/ledger.js';
import { formatUsd } from '../billing/money.js';
import type { Database } from '../record/database.js';
import { dailyKeySpend, findUsage, listUsagePage, REQUEST_STATUSES, UsageQueryError, type DailyKeySpend, type RecordedUsage, type UsagePage, type UsageFilter } from '../record/usage-query.js';
import { daySpendByKeyAndTeam, usageTotalsByKeyAndTeam, type KeyTeamDaySpend, type KeyTeamTotals } from '../record/usage-totals.js';
import { DashboardError } from './errors.js';
import { groupLabel, isUsageGrouping, USAGE_GROUPINGS, type GroupTotals, type UsageDirectory, type UsageGrouping, type UsagePeriod } from './usage-groups.js';
import type { UsageTotals } from '../record/usage-totals.js';

export interface UsageQuery {
  keyId?: string;
  model?: string;
  status?: RequestStatus;
  from?: string;
  to?: string;
  /** A request id: that one record, when it is this account's. */
  requestId?: string;
  cursor?: string;
  /** Only the keys this member made (a user id). */
  memberId?: string;
  /** Only the requests charged to this team. */
  teamId?: string;
  /** Totals per member or per team. */
  group?: UsageGrouping;
}

/** Whose usage a reader sees: the account's, or (a member) only that of their own keys. */
export interface UsageScope {
  accountId: string;
  /** Undefined: every key of the account. */
  keyIds?: readonly string[];
}

const text = (v: unknown): string | undefined => (typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined);

/** A real calendar day written YYYY-MM-DD (2026-02-30 is not one). */
function isDay(v: string): boolean {
  const ms = /^\d{4}-\d{2}-\d{2}$/.test(v) ? Date.parse(`${v}T00:00:00Z`) : Number.NaN;
  return Number.isFinite(ms) && new Date(ms).toISOString().startsWith(v);
}

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
  const memberId = text(q.member);
  const teamId = text(q.team);
  const group = text(q.group);
  if (status !== undefined && !(REQUEST_STATUSES as readonly string[]).includes(status)) throw new DashboardError(400, `status must be one of ${REQUEST_STATUSES.join(', ')}.`);
  for (const [name, v] of [['from', from], ['to', to]] as const) if (v !== undefined && !isDay(v)) throw new DashboardError(400, `${name} must be a date like 2026-11-01.`);
  if (from !== undefined && to !== undefined && from > to) throw new DashboardError(400, 'from must be on or before to.');
  if (group !== undefined && !isUsageGrouping(group)) throw new DashboardError(400, `group must be one of ${USAGE_GROUPINGS.join(', ')}.`);
  if (keyId !== undefined) out.keyId = keyId;
  if (model !== undefined) out.model = model;
  if (status !== undefined) out.status = status as RequestStatus;
  if (from !== undefined) out.from = from;
  if (to !== undefined) out.to = to;
  if (requestId !== undefined) out.requestId = requestId;
  if (cursor !== undefined) out.cursor = cursor;
  if (memberId !== undefined) out.memberId = memberId;
  if (teamId !== undefined) out.teamId = teamId;
  if (group !== undefined) out.group = group as UsageGrouping;
  return out;
}

function filterOf(scope: UsageScope, q: UsageQuery): UsageFilter {
  return {
    accountId: scope.accountId,
    ...(scope.keyIds === undefined ? {} : { keyIds: scope.keyIds }),
    ...(q.keyId === undefined ? {} : { keyId: q.keyId }),
    ...(q.model === undefined ? {} : { model: q.model }),
    ...(q.status === undefined ? {} : { status: q.status }),
    ...(q.teamId === undefined ? {} : { teamId: q.teamId }),
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

const dayOf = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

/** The filter's days, or by default this UTC month so far (totals over all time would read every record). */
export function periodOf(q: UsageQuery, now = new Date()): UsagePeriod {
  const monthStart = dayOf(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  const today = dayOf(now.getTime());
  const from = q.from ?? (q.to !== undefined && q.to < monthStart ? `${q.to.slice(0, 7)}-01` : monthStart);
  return { from, to: q.to ?? (from > today ? from : today) };
}

/** The days of a period in order. */
export function daysOf(p: UsagePeriod): string[] {
  const out: string[] = [];
  for (let ms = Date.parse(`${p.from}T00:00:00Z`), end = Date.parse(`${p.to}T00:00:00Z`); ms <= end; ms += 86_400_000) out.push(dayOf(ms));
  return out;
}

/** The totals per (key, team) of the period and the spend per day, to fold per member or team. */
export async function usageTotals(db: Database, scope: UsageScope, q: UsageQuery, now = new Date()): Promise<{ period: UsagePeriod; totals: KeyTeamTotals[]; days: KeyTeamDaySpend[] }> {
  const period = periodOf(q, now);
  const filter = filterOf(scope, { ...q, from: period.from, to: period.to });
  const [totals, days] = await checked(() => Promise.all([usageTotalsByKeyAndTeam(db, filter), daySpendByKeyAndTeam(db, filter)]));
  return { period, totals, days };
}

/** One CSV cell (the usage and audit log exports). */
export const csvCell = (v: string | number | boolean | null): string => {
  const s = v === null ? '' : String(v);
  // Quoted when needed; a leading = + - @ is prefixed so a spreadsheet never runs it as a formula.
  const safe = /^[=+\-@]/.test(s) ? `'${s}` : s;
  return /[",\n\r]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
};

// Columns added later go at the end, so a reader that takes columns by position keeps working.
const CSV_HEADER = 'finished_at,request_id,key_id,key_name,model,status,finish_reason,refusal_reason,input_tokens,output_tokens,cached_input_tokens,reasoning_tokens,cost_micro_usd,cost_usd,refunded,upstream,http_status,latency_ms,ttft_ms,model_refused,cache_write_5m_tokens,cache_write_1h_tokens,member_id,member_email,team_id,team_name';

/** The member who made the request's key and the team it was charged to, by id and in words. */
function whoCells(r: RecordedUsage, dir: UsageDirectory | undefined): Array<string | null> {
  const member = dir?.keyOwner.get(r.keyId) ?? null;
  return [member, member === null ? null : (dir?.members.get(member) ?? null), r.teamId ?? null, r.teamId === undefined || dir === undefined ? null : groupLabel('team', dir, r.teamId)];
}

const GROUP_CSV_COLUMNS = 'requests,cost_micro_usd,cost_usd,refunded_micro_usd,input_tokens,output_tokens,cached_input_tokens,cache_write_5m_tokens,cache_write_1h_tokens,reasoning_tokens,from,to';

const totalsCells = (t: UsageTotals, p: UsagePeriod): Array<string | number> => [t.requests, t.cost, formatUsd(t.cost), t.refunded, t.inputTokens, t.outputTokens, t.cachedInputTokens, t.cacheWrite5mTokens, t.cacheWrite1hTokens, t.reasoningTokens, p.from, p.to];

/** The totals per member or team as CSV: one row per group, largest cost first, then the total row. */
export function groupedCsv(grouping: UsageGrouping, period: UsagePeriod, groups: readonly GroupTotals[], total: UsageTotals): string {
  const head = grouping === 'member' ? 'member_id,member_email' : 'team_id,team_name';
  const rows = groups.map((g) => [g.id, g.label, ...totalsCells(g, period)].map(csvCell).join(','));
  return `${head},${GROUP_CSV_COLUMNS}\r\n${[...rows, ['total', '', ...totalsCells(total, period)].map(csvCell).join(',')].join('\r\n')}\r\n`;
}

/**
 * Every matching record as CSV (all pages), newest first, with a total row, as a stream: a page of
 * 1,000 records is read when the client has taken what came before (at most one page ahead), so an
 * export of any size holds a page or two in memory. The first page is read before the stream is
 * returned, so a bad filter is still a 400, not a cut-off download. `keyIds`: only these keys' records.
 */
export async function usageCsvStream(db: Database, accountId: string, q: UsageQuery, keyNames: Map<string, string>, keyIds?: readonly string[], dir?: UsageDirectory): Promise<Readable> {
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
        chunk += `${[new Date(r.finishedAt).toISOString(), r.requestId, r.keyId, keyNames.get(r.keyId) ?? '', r.model, r.status, r.finishReason, r.refusalReason, r.usage.input, r.usage.output, r.usage.cachedInput, r.usage.reasoning, r.cost, formatUsd(r.cost), r.refunded, r.upstream, r.httpStatus, r.latencyMs, r.ttftMs, r.modelRefused, r.usage.cacheWrite5m ?? 0, r.usage.cacheWrite1h ?? 0, ...whoCells(r, dir)].map(csvCell).join(',')}\r\n`;
      }
      if (chunk !== '') yield chunk;
      if (page.nextCursor === undefined) break;
      page = await read(page.nextCursor);
    }
    yield `${['total', '', '', '', '', '', '', '', '', '', '', '', total, formatUsd(total), '', '', '', '', '', '', '', '', '', '', '', ''].map(csvCell).join(',')}\r\n`;
  }
  // Bytes, not objects, with a small buffer: a page is not read until the one before has been taken.
  return Readable.from(lines(), { objectMode: false, highWaterMark: 16 * 1024 });
}
