// Usage and refund requests, as pages and as JSON API over the same modules.
import type Router from '@koa/router';
import type { Context } from 'koa';
import type { Database } from '../record/database.js';
import { findUsage, type RecordedUsage } from '../record/usage-query.js';
import type { DashboardState } from './state.js';
import type { Html } from './html.js';
import type { RefundTicket, RefundTickets } from './refund-tickets.js';
import type { Actor } from './actor.js';
import { DashboardError } from './errors.js';
import { need } from './route-guards.js';
import type { DashboardService } from './service.js';
import type { Session } from './sessions.js';
import { refundRequestPage, refundsPage, usagePageHtml } from './usage-pages.js';
import { dailySpend, groupedCsv, usageCsvStream, usagePage, usageQueryOf, usageTotals, type UsageQuery, type UsageScope } from './usage-view.js';
import { checkGroupFilters, foldDays, foldTotals, memberKeys, usageDirectory, type GroupedUsage, type UsageDirectory, type UsageGrouping, type UsageKey } from './usage-groups.js';
import type { UsageTotals } from '../record/usage-totals.js';
import { acting } from './state.js';

type Ctx = Context & { state: DashboardState; params: Record<string, string> };

export function apiUsage(r: RecordedUsage): Record<string, unknown> {
  return {
    request_id: r.requestId,
    key_id: r.keyId,
    team_id: r.teamId ?? null,
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

/** What a reader of usage may see: the keys (all of the account's with usage.all, else their own), the scope of the queries, and the names behind the ids. */
interface UsageReader {
  keys: UsageKey[];
  scope: UsageScope;
  dir: UsageDirectory;
}

async function readerOf(service: DashboardService, db: Database, actor: Actor): Promise<UsageReader> {
  const { keys, all } = await service.keys.usageKeys(actor);
  const scope = { accountId: actor.member.accountId, ...(all ? {} : { keyIds: keys.map((k) => k.id) }) };
  return { keys, scope, dir: await usageDirectory(db, actor, keys) };
}

/** The scope narrowed to the query's member (their keys), once the member and team filters are checked. */
function scopeFor(reader: UsageReader, actor: Actor, q: UsageQuery): UsageScope {
  checkGroupFilters(actor, reader.dir, q);
  if (q.memberId === undefined) return reader.scope;
  return { ...reader.scope, keyIds: memberKeys(reader.dir, reader.keys, reader.scope.keyIds, q.memberId) };
}

/** The request's filters, checked, and the scope they leave the reader. */
async function scopedQuery(service: DashboardService, db: Database, c: Ctx): Promise<{ reader: UsageReader; q: UsageQuery; scope: UsageScope }> {
  const actor = acting(c);
  const reader = await readerOf(service, db, actor);
  const q = usageQueryOf(c.query);
  return { reader, q, scope: scopeFor(reader, actor, q) };
}

/** The totals of the query's period folded by the grouping. */
async function groupedUsage(db: Database, scope: UsageScope, dir: UsageDirectory, q: UsageQuery, grouping: UsageGrouping): Promise<GroupedUsage> {
  const { period, totals, days } = await usageTotals(db, scope, q);
  return { grouping, period, ...foldTotals(totals, grouping, dir), days: foldDays(days, grouping, dir) };
}

const apiTotals = (t: UsageTotals): Record<string, number> => ({
  requests: t.requests,
  cost_micro_usd: t.cost,
  refunded_micro_usd: t.refunded,
  input_tokens: t.inputTokens,
  output_tokens: t.outputTokens,
  cached_input_tokens: t.cachedInputTokens,
  cache_write_5m_tokens: t.cacheWrite5mTokens,
  cache_write_1h_tokens: t.cacheWrite1hTokens,
  reasoning_tokens: t.reasoningTokens,
});

/** The usage and refund pages and their JSON twins. */
export function usageRoutes(router: Router<DashboardState>, deps: UsageDeps): void {
  usagePageRoutes(router, deps);
  refundPageRoutes(router, deps);
  usageApiRoutes(router, deps);
}

/** The Usage page (a bad filter is shown on the page, 400) and its CSV export. */
function usagePageRoutes(router: Router<DashboardState>, deps: UsageDeps): void {
  const { service, db, send } = deps;
  const renderUsage = async (c: Ctx, status = 200, error?: string): Promise<void> => {
    const s = who(c);
    const actor = acting(c);
    const reader = await readerOf(service, db, actor);
    const query = error === undefined ? usageQueryOf(c.query) : {};
    const scope = scopeFor(reader, actor, query);
    const [page, days, grouped] = await Promise.all([
      usagePage(db, scope, query),
      dailySpend(db, scope),
      query.group === undefined ? undefined : groupedUsage(db, scope, reader.dir, query, query.group),
    ]);
    send(c, usagePageHtml(s, { ...page, query, keys: reader.keys, days, dir: reader.dir, ...(grouped === undefined ? {} : { grouped }), ...(error === undefined ? {} : { error }) }), status);
  };
  router.get('/usage', need('usage.own'), async (ctx) => {
    const c = ctx as Ctx;
    try {
      await renderUsage(c);
    } catch (err) {
      // A filter that cannot be used (400), or another member's usage (403): said on the page, unfiltered.
      if (!(err instanceof DashboardError) || (err.status !== 400 && err.status !== 403)) throw err;
      await renderUsage(c, err.status, err.message);
    }
  });
  const csv = async (ctx: Context): Promise<void> => {
    const c = ctx as Ctx;
    const { reader, q, scope } = await scopedQuery(service, db, c);
    const day = new Date().toISOString().slice(0, 10);
    c.type = 'text/csv; charset=utf-8';
    if (q.group !== undefined) {
      const g = await groupedUsage(db, scope, reader.dir, q, q.group);
      c.set('Content-Disposition', `attachment; filename="tollgate-usage-by-${q.group}-${g.period.from}-${g.period.to}.csv"`);
      c.body = groupedCsv(q.group, g.period, g.groups, g.total);
      return;
    }
    const names = new Map(reader.keys.map((k) => [k.id, k.name]));
    const body = await usageCsvStream(db, scope.accountId, q, names, scope.keyIds, reader.dir);
    c.set('Content-Disposition', `attachment; filename="tollgate-usage-${day}.csv"`);
    c.body = body;
  };
  router.get('/usage.csv', need('usage.own'), csv);
  router.get('/api/usage.csv', need('usage.own'), csv);
}

/** Asking for a request's refund (post-redirect-get), and the list of requests sent. */
function refundPageRoutes(router: Router<DashboardState>, deps: UsageDeps): void {
  const { db, tickets, send } = deps;
  router.get('/usage/:requestId/refund', need('refunds.request'), async (ctx) => {
    const c = ctx as Ctx;
    const r = await findUsage(db, acting(c).member.accountId, c.params.requestId ?? '');
    if (r === undefined) throw new DashboardError(404, 'There is no such request on this account.');
    send(c, refundRequestPage(who(c), r));
  });
  router.post('/refunds', need('refunds.request'), async (ctx) => {
    const c = ctx as Ctx;
    const s = who(c);
    const accountId = acting(c).member.accountId;
    const b = c.state.body ?? {};
    try {
      const t = await tickets.open(accountId, b.request_id, b.reason, s.user.email);
      // Post-redirect-get: a reload shows the list, it does not post the request again.
      c.status = 303;
      c.redirect(`/refunds?opened=${encodeURIComponent(t.id)}`);
    } catch (err) {
      if (!(err instanceof DashboardError) || err.status >= 500) throw err;
      const r = typeof b.request_id === 'string' ? await findUsage(db, accountId, b.request_id) : undefined;
      if (r === undefined) throw err;
      send(c, refundRequestPage(s, r, err.message), err.status);
    }
  });
  router.get('/refunds', need('refunds.request'), async (ctx) => {
    const c = ctx as Ctx;
    const s = who(c);
    const list = await tickets.list(acting(c).member.accountId);
    const opened = typeof c.query.opened === 'string' ? list.find((t) => t.id === c.query.opened) : undefined;
    send(c, refundsPage(s, list, opened === undefined ? undefined : `Sent to support: refund request for ${opened.requestId}.`));
  });
}

/** JSON: usage records, daily spend, refund tickets. */
function usageApiRoutes(router: Router<DashboardState>, deps: UsageDeps): void {
  const { service, db, tickets } = deps;
  router.get('/api/usage', need('usage.own'), async (ctx) => {
    const c = ctx as Ctx;
    const { q, scope } = await scopedQuery(service, db, c);
    const page = await usagePage(db, scope, q, 100);
    c.body = { usage: page.records.map(apiUsage), next_cursor: page.nextCursor ?? null };
  });
  router.get('/api/usage/daily', need('usage.own'), async (ctx) => {
    const c = ctx as Ctx;
    c.body = { days: (await dailySpend(db, (await readerOf(service, db, acting(c))).scope)).map((d) => ({ key_id: d.keyId, day: d.day, spent_micro_usd: d.spent, requests: d.requests })) };
  });
  router.get('/api/usage/totals', need('usage.own'), async (ctx) => {
    const c = ctx as Ctx;
    const { reader, q, scope } = await scopedQuery(service, db, c);
    const g = await groupedUsage(db, scope, reader.dir, q, q.group ?? 'member');
    c.body = {
      group: g.grouping,
      from: g.period.from,
      to: g.period.to,
      groups: g.groups.map((x) => ({ id: x.id, name: x.label, ...apiTotals(x) })),
      total: apiTotals(g.total),
      days: g.days.map((d) => ({ day: d.day, id: d.id, spent_micro_usd: d.spent })),
    };
  });
  router.get('/api/refund-tickets', need('refunds.request'), async (ctx) => {
    const c = ctx as Ctx;
    c.body = { tickets: (await tickets.list(acting(c).member.accountId)).map(apiTicket) };
  });
  router.post('/api/refund-tickets', need('refunds.request'), async (ctx) => {
    const c = ctx as Ctx;
    const s = who(c);
    const b = c.state.body ?? {};
    c.status = 201;
    c.body = { ticket: apiTicket(await tickets.open(acting(c).member.accountId, b.request_id, b.reason, s.user.email)) };
  });
  router.get('/api/refund-tickets/:ticketId', need('refunds.request'), async (ctx) => {
    const c = ctx as Ctx;
    c.body = { ticket: apiTicket(await tickets.get(acting(c).member.accountId, c.params.ticketId ?? '')) };
  });
}
