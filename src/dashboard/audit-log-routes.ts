// The Audit log page and its CSV: an organization's owners and admins read their account's entries
// (/audit-log), the deployment's admin every entry (/admin/audit-log, optionally one account's). A bad
// filter is shown on the page (400); the CSV answers it as a 400 before any byte of the file.
import { Readable } from 'node:stream';
import type Router from '@koa/router';
import type { Context } from 'koa';
import { AUDIT_PAGE_MAX, AuditQueryError, auditFilterOf, listAuditEntries, type AuditFilter, type AuditPage } from '../audit/entries.js';
import type { Database } from '../record/database.js';
import { auditLogPageHtml, type AuditLogQuery } from './audit-log-pages.js';
import { DashboardError } from './errors.js';
import type { Html } from './html.js';
import { deploymentAdmin, need } from './route-guards.js';
import { acting, who, type DashboardState } from './state.js';
import { csvCell } from './usage-view.js';

type Ctx = Context & { state: DashboardState };

const PAGE = 50;

const CSV_HEADER = 'seq,at,account_id,actor_kind,actor_id,actor_label,address,user_agent,action,target,before,after,request_id,hash';

/** The filter of the query string, within `accountId` (undefined: every account, the deployment admin's). */
function filterOf(query: Record<string, unknown>, accountId: string | undefined, limit: number): AuditFilter {
  try {
    return { ...auditFilterOf(query, limit), ...(accountId === undefined ? {} : { accountId }) };
  } catch (err) {
    if (err instanceof AuditQueryError) throw new DashboardError(400, `${err.message}.`);
    throw err;
  }
}

/** The filters as typed, for the form and its links. */
function queryOf(query: Record<string, unknown>): AuditLogQuery {
  const text = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
  const q: AuditLogQuery = {};
  for (const k of ['who', 'action', 'from', 'to', 'account'] as const) {
    const v = text(query[k]);
    if (v !== undefined) q[k] = v;
  }
  return q;
}

/** Every matching entry as CSV, newest first, read a page at a time as the client takes it. */
async function csvStream(db: Database, filter: AuditFilter): Promise<Readable> {
  const read = (beforeSeq: number | undefined): Promise<AuditPage> => listAuditEntries(db, { ...filter, limit: AUDIT_PAGE_MAX, ...(beforeSeq === undefined ? {} : { beforeSeq }) });
  const first = await read(undefined);
  async function* lines(): AsyncGenerator<string> {
    yield `${CSV_HEADER}\r\n`;
    let page = first;
    for (;;) {
      let chunk = '';
      for (const e of page.entries) {
        const json = (v: Record<string, unknown> | null): string | null => (v === null ? null : JSON.stringify(v));
        chunk += `${[e.seq, e.at.toISOString(), e.accountId, e.actorKind, e.actorId, e.actorLabel, e.address, e.userAgent, e.action, e.target, json(e.before), json(e.after), e.requestId, e.hash].map(csvCell).join(',')}\r\n`;
      }
      if (chunk !== '') yield chunk;
      if (page.nextCursor === undefined) break;
      page = await read(page.nextCursor);
    }
  }
  return Readable.from(lines(), { objectMode: false, highWaterMark: 16 * 1024 });
}

export function auditLogRoutes(router: Router<DashboardState>, deps: { db: Database; requireTotp: boolean; send: (ctx: Context, page: Html, status?: number) => void }): void {
  const { db, send } = deps;
  /** The page of `path`, scoped to `accountId` (undefined: all); a bad filter re-renders it with the message. */
  const page = async (c: Ctx, path: '/audit-log' | '/admin/audit-log', accountId: string | undefined): Promise<void> => {
    const query = queryOf(c.query);
    try {
      const found = await listAuditEntries(db, filterOf(c.query, accountId, PAGE));
      send(c, auditLogPageHtml(who(c), { path, entries: found.entries, ...(found.nextCursor === undefined ? {} : { nextCursor: found.nextCursor }), query }));
    } catch (err) {
      if (!(err instanceof DashboardError) || err.status !== 400) throw err;
      send(c, auditLogPageHtml(who(c), { path, entries: [], query, error: err.message }), 400);
    }
  };
  const csv = async (c: Ctx, accountId: string | undefined): Promise<void> => {
    const body = await csvStream(db, filterOf(c.query, accountId, AUDIT_PAGE_MAX));
    c.type = 'text/csv; charset=utf-8';
    c.set('Content-Disposition', `attachment; filename="tollgate-audit-log-${new Date().toISOString().slice(0, 10)}.csv"`);
    c.body = body;
  };
  /** The deployment admin's account filter (the `account` field), if given. */
  const chosenAccount = (c: Ctx): string | undefined => (typeof c.query.account === 'string' && c.query.account !== '' ? c.query.account : undefined);
  router.get('/audit-log', need('audit.view'), (ctx) => page(ctx, '/audit-log', acting(ctx).member.accountId));
  router.get('/audit-log.csv', need('audit.view'), (ctx) => csv(ctx, acting(ctx).member.accountId));
  router.get('/admin/audit-log', deploymentAdmin(deps.requireTotp === true), (ctx) => page(ctx, '/admin/audit-log', chosenAccount(ctx)));
  router.get('/admin/audit-log.csv', deploymentAdmin(deps.requireTotp === true), (ctx) => csv(ctx, chosenAccount(ctx)));
}
