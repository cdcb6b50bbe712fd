// Reading the audit log: one page of entries, newest first, filtered by account (an organization's
// owners see their own), who, what (an action's prefix) and when. The dashboard's page and CSV and the
// admin API read it the same way.
import type { Queryable, SqlValue } from '../record/database.js';

export interface AuditEntry {
  seq: number;
  at: Date;
  accountId: string | null;
  actorKind: string;
  actorId: string | null;
  actorLabel: string | null;
  address: string | null;
  userAgent: string | null;
  action: string;
  target: string | null;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  requestId: string | null;
  hash: string;
}

export interface AuditFilter {
  /** Only entries about this account; none: every entry (the deployment's admin). */
  accountId?: string;
  /** The actor: their id, or their label (an e-mail address) in any case. */
  who?: string;
  /** An action or its start: `api_keys` for every change of a key, `sign_in.` for sign-ins. */
  action?: string;
  /** From this instant (inclusive) to that one (exclusive). */
  from?: Date;
  to?: Date;
  /** Entries before this one (the `nextCursor` of a page before). */
  beforeSeq?: number;
  limit: number;
}

export interface AuditPage {
  entries: AuditEntry[];
  /** The seq to continue from (older entries), when there are more. */
  nextCursor?: number;
}

/** A page holds at most this many entries (the CSV reads page after page). */
export const AUDIT_PAGE_MAX = 1000;

/** Bounds a filter's text takes before it is a refusal rather than a query. */
export const AUDIT_FILTER_TEXT_MAX = 200;

interface Row {
  seq: string | number;
  at: Date;
  account_id: string | null;
  actor_kind: string;
  actor_id: string | null;
  actor_label: string | null;
  address: string | null;
  user_agent: string | null;
  action: string;
  target: string | null;
  before: Record<string, unknown> | null;
  after: Record<string, unknown> | null;
  request_id: string | null;
  hash: string;
}

const likePrefix = (s: string): string => `${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

export async function listAuditEntries(q: Queryable, f: AuditFilter): Promise<AuditPage> {
  const where = ['seq IS NOT NULL'];
  const params: SqlValue[] = [];
  const param = (v: SqlValue): string => {
    params.push(v);
    return `$${params.length}`;
  };
  if (f.accountId !== undefined) where.push(`account_id = ${param(f.accountId)}`);
  if (f.who !== undefined) {
    const who = param(f.who);
    where.push(`(actor_id = ${who} OR lower(actor_label) = lower(${who}))`);
  }
  if (f.action !== undefined) where.push(`action LIKE ${param(likePrefix(f.action))}`);
  if (f.from !== undefined) where.push(`at >= ${param(f.from)}`);
  if (f.to !== undefined) where.push(`at < ${param(f.to)}`);
  if (f.beforeSeq !== undefined) where.push(`seq < ${param(f.beforeSeq)}`);
  const limit = Math.min(Math.max(1, f.limit), AUDIT_PAGE_MAX);
  const r = await q.query<Row>(
    `SELECT seq, at, account_id, actor_kind, actor_id, actor_label, address, user_agent, action, target, before, after, request_id, hash
       FROM audit_log WHERE ${where.join(' AND ')} ORDER BY seq DESC LIMIT ${limit + 1}`,
    params,
  );
  const entries = r.rows.slice(0, limit).map(
    (row): AuditEntry => ({
      seq: Number(row.seq),
      at: row.at,
      accountId: row.account_id,
      actorKind: row.actor_kind,
      actorId: row.actor_id,
      actorLabel: row.actor_label,
      address: row.address,
      userAgent: row.user_agent,
      action: row.action,
      target: row.target,
      before: row.before,
      after: row.after,
      requestId: row.request_id,
      hash: row.hash,
    }),
  );
  const last = entries.at(-1);
  return { entries, ...(r.rows.length > limit && last !== undefined ? { nextCursor: last.seq } : {}) };
}

/** An entry as the admin API and the CSV name its fields. */
export function auditEntryBody(e: AuditEntry): Record<string, unknown> {
  return {
    seq: e.seq,
    at: e.at.toISOString(),
    account_id: e.accountId,
    actor_kind: e.actorKind,
    actor_id: e.actorId,
    actor_label: e.actorLabel,
    address: e.address,
    user_agent: e.userAgent,
    action: e.action,
    target: e.target,
    before: e.before,
    after: e.after,
    request_id: e.requestId,
    hash: e.hash,
  };
}

/** A filter given wrong (the caller's fault: each edge answers it in its own words and format). */
export class AuditQueryError extends Error {}

const DATE = /^\d{4}-\d{2}-\d{2}$/;
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})$/;

/** A bound of `when`: a date (UTC; as `to`, the whole day is included) or an ISO 8601 date-time with its zone. */
function timeOf(name: 'from' | 'to', text: string): Date {
  if (DATE.test(text)) {
    const day = new Date(`${text}T00:00:00Z`);
    if (!Number.isNaN(day.getTime())) return name === 'to' ? new Date(day.getTime() + 86_400_000) : day;
  } else if (DATE_TIME.test(text)) {
    const at = new Date(text);
    if (!Number.isNaN(at.getTime())) return at;
  }
  throw new AuditQueryError(`${name} must be a date like 2026-11-01 or a date-time like 2026-11-01T12:00:00Z`);
}

/**
 * The filters of a query string (who, action, from, to, cursor, limit), checked. Empty values are no
 * filter (a form's empty field). The account is the caller's to set, never the query's.
 */
export function auditFilterOf(query: Record<string, unknown>, defaultLimit: number): Omit<AuditFilter, 'accountId'> {
  const text = (name: string): string | undefined => {
    const v = query[name];
    if (v === undefined || v === '') return undefined;
    if (typeof v !== 'string') throw new AuditQueryError(`give ${name} once`);
    const t = v.trim();
    if (t.length > AUDIT_FILTER_TEXT_MAX) throw new AuditQueryError(`${name} is longer than ${AUDIT_FILTER_TEXT_MAX} characters`);
    return t === '' ? undefined : t;
  };
  const f: Omit<AuditFilter, 'accountId'> = { limit: defaultLimit };
  const who = text('who');
  const action = text('action');
  const from = text('from');
  const to = text('to');
  const cursor = text('cursor');
  const limit = text('limit');
  if (who !== undefined) f.who = who;
  if (action !== undefined) f.action = action;
  if (from !== undefined) f.from = timeOf('from', from);
  if (to !== undefined) f.to = timeOf('to', to);
  if (cursor !== undefined) {
    if (!/^\d{1,15}$/.test(cursor)) throw new AuditQueryError('cursor must be the next_cursor of a page before');
    f.beforeSeq = Number(cursor);
  }
  if (limit !== undefined) {
    if (!/^\d{1,4}$/.test(limit) || Number(limit) < 1 || Number(limit) > AUDIT_PAGE_MAX) throw new AuditQueryError(`limit must be a whole number from 1 to ${AUDIT_PAGE_MAX}`);
    f.limit = Number(limit);
  }
  return f;
}
