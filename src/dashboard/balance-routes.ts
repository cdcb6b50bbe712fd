// Balance and top-ups, as pages and as JSON API over the same services: seen with billing.view, money
// added (top-ups, automatic top-ups) with billing.manage.
import type { AutoTopUps } from '../top-ups/auto-top-up.js';
import type Router from '@koa/router';
import type { Context } from 'koa';
import { parseUsdCents } from '../top-ups/quote.js';
import { TopUpError, type TopUpService, type TopUpView } from '../top-ups/service.js';
import { balancePage, quotePage, topUpPage } from './balance-pages.js';
import type { Html } from './html.js';
import { DashboardError } from './errors.js';
import { need } from './route-guards.js';
import type { DashboardService } from './service.js';
import type { Session } from './sessions.js';
import { acting, type DashboardState } from './state.js';

type Ctx = Context & { state: DashboardState; params: Record<string, string> };

function apiTopUp(t: TopUpView): Record<string, unknown> {
  return {
    id: t.id,
    provider: t.provider,
    credit_cents: t.creditCents,
    fee_cents: t.feeCents,
    total_cents: t.totalCents,
    state: t.state,
    checkout_url: t.state === 'pending' ? t.checkoutUrl : null,
    created_at: t.createdAt.toISOString(),
    credited_at: t.creditedAt?.toISOString() ?? null,
    ...(t.timeline === undefined ? {} : { timeline: t.timeline.map((e) => ({ kind: e.kind, amount_cents: e.amountCents, detail: e.detail, at: e.at.toISOString() })) }),
  };
}

export function balanceRoutes(
  router: Router<DashboardState>,
  deps: { service: DashboardService; topUps: TopUpService | undefined; autoTopUps: AutoTopUps | undefined; send: (ctx: Context, page: Html, status?: number) => void },
): void {
  const { service, topUps, autoTopUps, send } = deps;
  const who = (ctx: Ctx): Session => ctx.state.session as Session;
  const needTopUps = (): TopUpService => {
    if (topUps === undefined) throw new DashboardError(404, 'Top-ups are not set up on this Tollgate.');
    return topUps;
  };
  const query = (ctx: Ctx, name: string): string | undefined => {
    const v = ctx.query[name];
    return typeof v === 'string' ? v : undefined;
  };

  const renderBalance = async (ctx: Ctx, extra: { error?: string; amount?: string; autoError?: string } = {}, status = 200): Promise<void> => {
    const s = who(ctx);
    // Back from saving a card at the provider: keep it (a setup not finished yet says so).
    const setupId = query(ctx, 'card_setup');
    let autoNote: string | undefined;
    if (setupId !== undefined && autoTopUps !== undefined && query(ctx, 'cancelled') !== '1') {
      const saved = await autoTopUps.completeCardSetup(acting(ctx).member.accountId, setupId).catch(() => false);
      autoNote = saved ? 'Card saved. Set the threshold and amount below and turn automatic top-ups on.' : 'The card is not saved yet: finish on the payment page, or try again.';
    }
    if (query(ctx, 'auto') === 'saved') autoNote = 'Automatic top-up settings saved.';
    const auto = autoTopUps === undefined ? undefined : await autoTopUps.settings(acting(ctx).member.accountId);
    const [bal, statement, list] = await Promise.all([service.balance(acting(ctx)), service.statement(acting(ctx), query(ctx, 'cursor')), topUps?.list(acting(ctx).member.accountId) ?? []]);
    const flashId = query(ctx, 'top_up');
    // Back from the provider's "cancel" link (a GET the provider's page sends the browser to): nothing
    // changes here; a checkout still open is offered a button that POSTs its cancellation.
    const flash = flashId === undefined || topUps === undefined ? undefined : await topUps.get(acting(ctx).member.accountId, flashId).catch(() => undefined);
    const left = query(ctx, 'cancelled') === '1';
    send(ctx, balancePage(s, { ...bal, statement, topUps: list, labelOf: (t) => topUps?.labelOf(t.provider) ?? t.provider, canTopUp: topUps !== undefined, ...(flash === undefined ? {} : { flash }), left, ...(auto === undefined ? {} : { auto }), ...(autoNote === undefined ? {} : { autoNote }), ...extra }), status);
  };

  router.get('/balance', need('billing.view'), (ctx) => renderBalance(ctx as Ctx));
  router.post('/balance/quote', need('billing.manage'), async (ctx) => {
    const c = ctx as Ctx;
    const t = needTopUps();
    const input = String(c.state.body?.amount_usd ?? '');
    try {
      const q = t.quote(parseUsdCents(input));
      send(c, quotePage(who(c), input, q, t.offered.map((p) => ({ name: p.name, label: p.label }))));
    } catch (err) {
      if (!(err instanceof TopUpError)) throw err;
      await renderBalance(c, { error: err.message, amount: input }, err.status);
    }
  });
  router.post('/balance/top-ups', need('billing.manage'), async (ctx) => {
    const c = ctx as Ctx;
    const b = c.state.body ?? {};
    try {
      const { checkoutUrl } = await needTopUps().start(acting(c).member.accountId, parseUsdCents(b.amount_usd), b.provider);
      c.status = 303;
      c.redirect(checkoutUrl);
    } catch (err) {
      if (!(err instanceof TopUpError)) throw err;
      await renderBalance(c, { error: err.message, amount: String(b.amount_usd ?? '') }, err.status);
    }
  });
  router.get('/top-ups/:id', need('billing.view'), async (ctx) => {
    const c = ctx as Ctx;
    send(c, topUpPage(who(c), await needTopUps().get(acting(c).member.accountId, c.params.id ?? ''), (t) => needTopUps().labelOf(t.provider)));
  });
  router.post('/top-ups/:id/recheck', need('billing.manage'), async (ctx) => {
    const c = ctx as Ctx;
    const t = await needTopUps().recheck(acting(c).member.accountId, c.params.id ?? '');
    c.redirect(`/top-ups/${t.id}`);
  });
  // The holder cancels: a checkout still open (closed at the provider), or an automatic top-up not charged yet.
  router.post('/top-ups/:id/cancel', need('billing.manage'), async (ctx) => {
    const c = ctx as Ctx;
    const t = await cancelTopUp(needTopUps(), autoTopUps, acting(c).member.accountId, c.params.id ?? '');
    c.status = 303;
    c.redirect(`/top-ups/${encodeURIComponent(t.id)}`);
  });

  autoTopUpRoutes(router, autoTopUps, renderBalance);
  balanceApiRoutes(router, service, needTopUps, autoTopUps);
}

/** Cancels a top-up of the account by how it was started; 409 when it can no longer be cancelled. */
async function cancelTopUp(topUps: TopUpService, autoTopUps: AutoTopUps | undefined, accountId: string, id: string): Promise<TopUpView> {
  const t = await topUps.get(accountId, id);
  if (t.origin === 'checkout') return topUps.cancel(accountId, id);
  if (autoTopUps === undefined) throw new DashboardError(409, 'Automatic top-ups are not set up on this Tollgate.');
  await autoTopUps.cancel(accountId, id);
  return topUps.get(accountId, id);
}

/** Automatic top-ups: the card setup and the settings form (post-redirect-get). */
function autoTopUpRoutes(router: Router<DashboardState>, autoTopUps: AutoTopUps | undefined, renderBalance: (ctx: Ctx, extra: { autoError?: string }, status: number) => Promise<void>): void {
  const needAuto = (): AutoTopUps => {
    if (autoTopUps === undefined) throw new DashboardError(404, 'Automatic top-ups need card payments, which are not set up on this Tollgate.');
    return autoTopUps;
  };
  router.post('/balance/auto-top-up', need('billing.manage'), async (ctx) => {
    const c = ctx as Ctx;
    const b = c.state.body ?? {};
    try {
      await needAuto().configure(acting(c).member.accountId, {
        enabled: b.enabled === 'on' || b.enabled === 'true',
        thresholdCents: parseUsdCents(b.threshold_usd),
        amountCents: parseUsdCents(b.amount_usd),
        monthlyMaxCents: parseUsdCents(b.monthly_max_usd),
      });
      c.status = 303;
      c.redirect('/balance?auto=saved#auto-top-up');
    } catch (err) {
      if (!(err instanceof TopUpError)) throw err;
      await renderBalance(c, { autoError: err.message }, err.status);
    }
  });
  router.post('/balance/auto-top-up/card', need('billing.manage'), async (ctx) => {
    const c = ctx as Ctx;
    const url = await needAuto().startCardSetup(acting(c).member.accountId);
    c.status = 303;
    c.redirect(url);
  });
}

/** The Balance page's JSON twins: balance, statement, top-ups. */
function balanceApiRoutes(router: Router<DashboardState>, service: DashboardService, needTopUps: () => TopUpService, autoTopUps: AutoTopUps | undefined): void {
  const query = (ctx: Ctx, name: string): string | undefined => {
    const v = ctx.query[name];
    return typeof v === 'string' ? v : undefined;
  };
  router.get('/api/balance', need('billing.view'), async (ctx) => {
    const c = ctx as Ctx;
    const b = await service.balance(acting(c));
    c.body = { balance_micro_usd: b.balance, held_micro_usd: b.held };
  });
  router.get('/api/statement', need('billing.view'), async (ctx) => {
    const c = ctx as Ctx;
    const limit = query(c, 'limit');
    const page = await service.statement(acting(c), query(c, 'cursor'), limit === undefined ? 50 : Number(limit));
    c.body = {
      entries: page.lines.map((l) => ({
        entry_id: l.entryId,
        kind: l.kind,
        amount_micro_usd: l.amount,
        balance_after_micro_usd: l.balanceAfter,
        request_id: l.requestId,
        reference: l.reference,
        memo: l.memo,
        created_at: new Date(l.createdAt).toISOString(),
        ...(l.tokens === undefined
          ? {}
          : {
              tokens: {
                input_tokens: l.tokens.input,
                output_tokens: l.tokens.output,
                cached_input_tokens: l.tokens.cacheRead,
                cache_write_5m_tokens: l.tokens.cacheWrite5m,
                cache_write_1h_tokens: l.tokens.cacheWrite1h,
              },
            }),
      })),
      next_cursor: page.nextCursor ?? null,
    };
  });
  router.post('/api/top-ups/quote', need('billing.manage'), async (ctx) => {
    const c = ctx as Ctx;
    const q = await needTopUps().quote(parseUsdCents(c.state.body?.amount_usd));
    c.body = { credit_cents: q.creditCents, fee_cents: q.feeCents, total_cents: q.totalCents };
  });
  router.post('/api/top-ups', need('billing.manage'), async (ctx) => {
    const c = ctx as Ctx;
    const b = c.state.body ?? {};
    const started = await needTopUps().start(acting(c).member.accountId, parseUsdCents(b.amount_usd), b.provider);
    c.status = 201;
    c.body = { top_up: apiTopUp(started.topUp), checkout_url: started.checkoutUrl };
  });
  router.get('/api/top-ups', need('billing.view'), async (ctx) => {
    const c = ctx as Ctx;
    c.body = { top_ups: (await needTopUps().list(acting(c).member.accountId)).map(apiTopUp) };
  });
  router.get('/api/top-ups/:id', need('billing.view'), async (ctx) => {
    const c = ctx as Ctx;
    c.body = { top_up: apiTopUp(await needTopUps().get(acting(c).member.accountId, c.params.id ?? '')) };
  });
  router.post('/api/top-ups/:id/recheck', need('billing.manage'), async (ctx) => {
    const c = ctx as Ctx;
    c.body = { top_up: apiTopUp(await needTopUps().recheck(acting(c).member.accountId, c.params.id ?? '')) };
  });
  router.post('/api/top-ups/:id/cancel', need('billing.manage'), async (ctx) => {
    const c = ctx as Ctx;
    c.body = { top_up: apiTopUp(await cancelTopUp(needTopUps(), autoTopUps, acting(c).member.accountId, c.params.id ?? '')) };
  });
}
