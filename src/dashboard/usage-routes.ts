// Usage and refund requests, as pages and as JSON API over the same modules.
import type Router from '@koa/router';
import type { Context } from 'koa';
import type { Database } from '../record/database.js';
import { findUsage, type RecordedUsage } from '../record/usage-query.js';
import type { DashboardState } from './state.js';
import type { Html } from './html.js';
import type { RefundTicket, RefundTickets } from './refund-tickets.js';
import { DashboardError, type DashboardService, type Session } from './service.js';
import { refundRequestPage, refundsPage, usagePageHtml } from './usage-pages.js';
import { dailySpend, usageCsvStream, usagePage, usageQueryOf } from './usage-view.js';

type Ctx = Context & { state: DashboardState; params: Record<string, string> };

export function apiUsage(r: RecordedUsage): Record<string, unknown> {
  return {
    request_id: r.requestId,
    key_id: r.keyId,
    model: r.model,
    upstream: r.upstream,
    status: r.status,
    http_status: r.httpStatus,
    finish_reason: r.finishReason,
    refusal_reason: r.refusalReason,
    model_refused: r.modelRefused,
    latency_ms: r.latencyMs,
    ttft_ms: r.ttftMs,
    input_tokens: r.usage.input,
    output_tokens: r.usage.output,
    cached_input_tokens: r.usage.cachedInput,
    cache_write_5m_tokens: r.usage.cacheWrite5m ?? 0,
    cache_write_1h_tokens: r.usage.cacheWrite1h ?? 0,
    reasoning_tokens: r.usage.reasoning,
    cost_micro_usd: r.cost,
    reserved_micro_usd: r.reserved,
    refunded: r.refunded,
    started_at: new Date(r.startedAt).toISOString(),
    finished_at: new Date(r.finishedAt).toISOString(),
  };
}

export function apiTicket(t: RefundTicket): Record<string, unknown> {
  return {
    id: t.id,
    request_id: t.requestId,
    reason: t.reason,
    status: t.status,
    cost_micro_usd: t.cost,
    refunded_micro_usd: t.refunded,
    note: t.note,
    model_refused: t.modelRefused,
    created_at: t.createdAt.toISOString(),
    decided_at: t.decidedAt?.toISOString() ?? null,
  };
}

type UsageDeps = { service: DashboardService; db: Database; tickets: RefundTickets; send: (ctx: Context, page: Html, status?: number) => void };

const who = (ctx: Ctx): Session => ctx.state.session as Session;

/** The usage and refund pages and their JSON twins. */
export function usageRoutes(router: Router<DashboardState>, deps: UsageDeps): void {
  usagePageRoutes(router, deps);
  refundPageRoutes(router, deps);
  usageApiRoutes(router, deps);
}

/** The Usage page (a bad filter is shown on the page, 400) and its CSV export. */
function usagePageRoutes(router: Router<DashboardState>, deps: UsageDeps): void {
  const { service, db, send } = deps;
  const keysOf = async (s: Session) => (await service.listKeys(s.user)).map((k) => ({ id: k.id, name: k.name }));
  const renderUsage = async (c: Ctx, status = 200, error?: string): Promise<void> => {
    const s = who(c);
    const query = error === undefined ? usageQueryOf(c.query) : {};
    const [page, keys, days] = await Promise.all([usagePage(db, s.user.accountId, query), keysOf(s), dailySpend(db, s.user.accountId)]);
    send(c, usagePageHtml(s, { ...page, query, keys, days, ...(error === undefined ? {} : { error }) }), status);
  };
  router.get('/usage', async (ctx) => {
    const c = ctx as Ctx;
    try {
      await renderUsage(c);
    } catch (err) {
      if (!(err instanceof DashboardError) || err.status !== 400) throw err;
      await renderUsage(c, 400, err.message);
    }
  });
  const csv = async (ctx: Context): Promise<void> => {
    const c = ctx as Ctx;
    const s = who(c);
    const names = new Map((await keysOf(s)).map((k) => [k.id, k.name]));
    const body = await usageCsvStream(db, s.user.accountId, usageQueryOf(c.query), names);
    c.type = 'text/csv; charset=utf-8';
    c.set('Content-Disposition', `attachment; filename="tollgate-usage-${new Date().toISOString().slice(0, 10)}.csv"`);
    c.body = body;
  };
  router.get('/usage.csv', csv);
  router.get('/api/usage.csv', csv);
}

/** Asking for a request's refund (post-redirect-get), and the list of requests sent. */
function refundPageRoutes(router: Router<DashboardState>, deps: UsageDeps): void {
  const { db, tickets, send } = deps;
  router.get('/usage/:requestId/refund', async (ctx) => {
    const c = ctx as Ctx;
    const r = await findUsage(db, who(c).user.accountId, c.params.requestId ?? '');
    if (r === undefined) throw new DashboardError(404, 'There is no such request on this account.');
    send(c, refundRequestPage(who(c), r));
  });
  router.post('/refunds', async (ctx) => {
    const c = ctx as Ctx;
    const s = who(c);
    const b = c.state.body ?? {};
    try {
      const t = await tickets.open(s.user.accountId, b.request_id, b.reason, s.user.email);
      // Post-redirect-get: a reload shows the list, it does not post the request again.
      c.status = 303;
      c.redirect(`/refunds?opened=${encodeURIComponent(t.id)}`);
    } catch (err) {
      if (!(err instanceof DashboardError) || err.status >= 500) throw err;
      const r = typeof b.request_id === 'string' ? await findUsage(db, s.user.accountId, b.request_id) : undefined;
      if (r === undefined) throw err;
      send(c, refundRequestPage(s, r, err.message), err.status);
    }
  });
  router.get('/refunds', async (ctx) => {
    const c = ctx as Ctx;
    const s = who(c);
    const list = await tickets.list(s.user.accountId);
    const opened = typeof c.query.opened === 'string' ? list.find((t) => t.id === c.query.opened) : undefined;
    send(c, refundsPage(s, list, opened === undefined ? undefined : `Sent to support: refund request for ${opened.requestId}.`));
  });
}

/** JSON: usage records, daily spend, refund tickets. */
function usageApiRoutes(router: Router<DashboardState>, deps: UsageDeps): void {
  const { db, tickets } = deps;
  router.get('/api/usage', async (ctx) => {
    const c = ctx as Ctx;
    const page = await usagePage(db, who(c).user.accountId, usageQueryOf(c.query), 100);
    c.body = { usage: page.records.map(apiUsage), next_cursor: page.nextCursor ?? null };
  });
  router.get('/api/usage/daily', async (ctx) => {
    const c = ctx as Ctx;
    c.body = { days: (await dailySpend(db, who(c).user.accountId)).map((d) => ({ key_id: d.keyId, day: d.day, spent_micro_usd: d.spent, requests: d.requests })) };
  });
  router.get('/api/refund-tickets', async (ctx) => {
    const c = ctx as Ctx;
    c.body = { tickets: (await tickets.list(who(c).user.accountId)).map(apiTicket) };
  });
  router.post('/api/refund-tickets', async (ctx) => {
    const c = ctx as Ctx;
    const s = who(c);
    const b = c.state.body ?? {};
    c.status = 201;
    c.body = { ticket: apiTicket(await tickets.open(s.user.accountId, b.request_id, b.reason, s.user.email)) };
  });
  router.get('/api/refund-tickets/:ticketId', async (ctx) => {
    const c = ctx as Ctx;
    c.body = { ticket: apiTicket(await tickets.get(who(c).user.accountId, c.params.ticketId ?? '')) };
  });
}
