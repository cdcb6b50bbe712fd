// The dashboard's Koa app: session loading, the cross-origin and CSRF guards, then pages and /api routes
// over one DashboardService (its parts). Middleware (middleware.ts) and route modules are composed once
// here; the session travels in ctx.state (state.ts). Every guarded route names what it needs first
// (route-guards.ts).
import Router from '@koa/router';
import Koa from 'koa';
import type { CatalogSnapshot } from '../catalog/snapshot.js';
import type { ReconciliationReport } from '../record/reconcile.js';
import type { AutoTopUps } from '../top-ups/auto-top-up.js';
import type { TopUpService } from '../top-ups/service.js';
import { accountRoutes } from './account-routes.js';
import { adminRoutes } from './admin-routes.js';
import { auditLogRoutes } from './audit-log-routes.js';
import { balanceRoutes } from './balance-routes.js';
import { keyApi, keyPages } from './key-routes.js';
import { modelRoutes } from './model-routes.js';
import { Identity } from './identity.js';
import { answerErrors, changeActor, loadSessionAndBody, notFound, refuseCrossSite, requireSession, scriptAsset, securityHeaders } from './middleware.js';
import { recoveryRoutes, signInRoutes } from './open-routes.js';
import { organizationRoutes } from './org-routes.js';
import { teamRoutes } from './team-routes.js';
import { ssoRoutes } from './sso-routes.js';
import { RefundTickets } from './refund-tickets.js';
import type { DashboardService } from './service.js';
import { send, sessionCookie, who, type DashboardState } from './state.js';
import { usageRoutes } from './usage-routes.js';

export type { DashboardState } from './state.js';

export interface DashboardAppOptions {
  service: DashboardService;
  secureCookie: boolean;
  /** Top-ups (the Balance page's form); absent when no provider is set up. */
  topUps?: TopUpService;
  /** The payment providers' webhook routes, built by top-ups (top-ups/run.ts) and served on this port. */
  webhooks?: Koa.Middleware;
  /** Automatic top-ups by a saved card (Stripe only); absent when no provider keeps cards. */
  autoTopUps?: AutoTopUps;
  /**
   * The address browsers use (DASHBOARD_PUBLIC_URL), e.g. https://dash.example.com behind a TLS
   * ingress: state changes must come from its origin. Unset: this server's own protocol and host.
   */
  publicUrl?: string;
  /**
   * Behind a reverse proxy (an ingress): the client address for the per-address sign-in throttle is
   * taken from the last X-Forwarded-For hop it added (DASHBOARD_TRUST_PROXY). Off: the socket's peer,
   * and a forwarded header a client sends is ignored.
   */
  trustProxy?: boolean;
  /** Where refund requests are mailed (DASHBOARD_SUPPORT_EMAIL). */
  supportEmail?: string;
  /** Compares the record and the hot path (the admin page's reconciliation). */
  reconcile?: () => Promise<ReconciliationReport>;
  /** The catalog the gateway serves (the Models page); absent: the page says there is none to show. */
  models?: () => CatalogSnapshot;
  /**
   * This server's own address as configured to listen (set by startDashboard once it listens): the base
   * of mailed links when publicUrl is unset. Never the request's Host header, which a sender controls.
   */
  selfUrl?: () => string;
}

/** The routes behind the session guard: the user's own, keys, balance and top-ups, usage and refunds, organizations, teams, the audit log, admin. */
export function guardedRoutes(opts: DashboardAppOptions, deps: { cookie: ReturnType<typeof sessionCookie>; linkBase: () => string }): Router<DashboardState> {
  const { service } = opts;
  const guarded = new Router<DashboardState>();
  guarded.use(requireSession());
  accountRoutes(guarded, { service, ...deps });
  keyPages(guarded, service, opts.secureCookie);
  // Money comes in only to a confirmed address's account (the top-up routes are balance-routes').
  const TOP_UP_STARTS = new Set(['/balance/quote', '/balance/top-ups', '/api/top-ups', '/api/top-ups/quote', '/balance/auto-top-up', '/balance/auto-top-up/card']);
  guarded.use(async (ctx, next) => {
    if (ctx.method === 'POST' && TOP_UP_STARTS.has(ctx.path)) Identity.requireConfirmed(who(ctx).user);
    await next();
  });
  balanceRoutes(guarded, { service, topUps: opts.topUps, autoTopUps: opts.autoTopUps, send });
  const tickets = new RefundTickets({ db: service.db, accounts: service.accounts, supportEmail: opts.supportEmail ?? 'support@tollgate.local' });
  usageRoutes(guarded, { service, db: service.db, tickets, send });
  modelRoutes(guarded, { models: opts.models, send });
  organizationRoutes(guarded, service, deps.linkBase);
  teamRoutes(guarded, service);
  auditLogRoutes(guarded, { db: service.db, requireTotp: service.adminRequiresTotp, send });
  adminRoutes(guarded, {
    accounts: service.accounts,
    requireTotp: service.adminRequiresTotp,
    db: service.db,
    twoFactor: service.twoFactor,
    tickets,
    topUps: opts.topUps,
    send,
    ...(opts.reconcile === undefined ? {} : { reconcile: opts.reconcile }),
  });

  keyApi(guarded, service);
  return guarded;
}

export function createDashboardApp(opts: DashboardAppOptions): Koa<DashboardState> {
  const { service } = opts;
  const app = new Koa<DashboardState>();
  app.proxy = opts.trustProxy === true;
  // Only the hop our proxy appended counts: anything before it is what the client claimed.
  app.maxIpsCount = 1;
  const publicOrigin = opts.publicUrl === undefined ? undefined : new URL(opts.publicUrl).origin;
  // Mailed links (password reset, address confirmation) go to the configured public address, else the
  // address this server was configured to listen on; never one taken from the request's Host header.
  const linkBase = (): string => {
    const own = publicOrigin ?? opts.selfUrl?.();
    if (own === undefined || own === '') throw new Error('the dashboard has no address for mailed links (DASHBOARD_PUBLIC_URL)');
    return own;
  };
  const cookie = sessionCookie(opts.secureCookie);

  app.use(answerErrors());
  app.use(securityHeaders((opts.topUps?.offered ?? []).map((p) => p.checkoutOrigin)));
  app.use(scriptAsset());
  // The payment providers' webhooks: no session, no CSRF token, their own signature on the raw body.
  if (opts.webhooks !== undefined) app.use(opts.webhooks);
  app.use(refuseCrossSite(publicOrigin));
  app.use(loadSessionAndBody(service.sessions));
  app.use(changeActor());

  const open = new Router<DashboardState>();
  signInRoutes(open, { service, cookie, linkBase });
  recoveryRoutes(open, { service, cookie, linkBase });
  ssoRoutes(open, { service, cookie });
  const guarded = guardedRoutes(opts, { cookie, linkBase });
  app.use(open.routes());
  app.use(open.allowedMethods());
  app.use(guarded.routes());
  app.use(guarded.allowedMethods());
  app.use(notFound());
  return app;
}
