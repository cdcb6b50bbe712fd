// The dashboard's Koa app: session loading, the cross-origin and CSRF guards, then pages and /api routes
// over one DashboardService. Middleware is composed once here; the session travels in ctx.state.
import type { AutoTopUps } from '../top-ups/auto-top-up.js';
import { existsSync, readFileSync } from 'node:fs';
import Router from '@koa/router';
import Koa, { type Context } from 'koa';
import type { Html } from './html.js';
import { confirmedPage, editCapsPage, errorPage, keysPage, resetPasswordPage, resetRequestPage, revokePage, signInPage, signUpPage, twoFactorPage } from './pages.js';
import { openReveal, sealReveal, REVEAL_COOKIE } from './key-reveal.js';
import { capsFromInput, DashboardError, DashboardService, type KeyView, type Session } from './service.js';
import { balanceRoutes } from './balance-routes.js';
import { adminRoutes } from './admin-routes.js';
import { RefundTickets } from './refund-tickets.js';
import { usageRoutes } from './usage-routes.js';
import type { ReconciliationReport } from '../record/reconcile.js';
import type { TopUpService } from '../top-ups/service.js';
import { ClientError } from '../http/client-error.js';
import { parseJsonObject, readBodyText, type BodyRefusals } from '../http/read-body.js';

export interface DashboardState {
  session?: Session;
  sessionId?: string;
  body?: Record<string, unknown>;
}

type Ctx = Koa.ParameterizedContext<DashboardState> & { params: Record<string, string> };

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
  /**
   * This server's own address as configured to listen (set by startDashboard once it listens): the base
   * of mailed links when publicUrl is unset. Never the request's Host header, which a sender controls.
   */
  selfUrl?: () => string;
}

/** Paths that carry a secret token: logged with the token replaced. */
const TOKEN_PATH = /^(\/(?:api\/)?(?:password-reset|verify-email)\/)[^/]+/;
export const redactPath = (path: string): string => path.replace(TOKEN_PATH, '$1[redacted]');

export const SESSION_COOKIE = 'tg_session';

// Beside this module when run from source; from the compiled tree (dist/src/dashboard) the sources'.
function readAsset(file: string): string {
  let url = new URL(`./assets/${file}`, import.meta.url);
  if (!existsSync(url)) url = new URL(`../../../src/dashboard/assets/${file}`, import.meta.url);
  return readFileSync(url, 'utf8');
}
const DASHBOARD_SCRIPT = readAsset('dashboard.js');
const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const MAX_BODY = 64 * 1024;

function apiKey(k: KeyView): Record<string, unknown> {
  return {
    id: k.id,
    name: k.name,
    display_hint: k.displayHint,
    created_at: new Date(k.createdAt).toISOString(),
    state: k.state,
    revoked_at: k.revokedAt === undefined ? null : new Date(k.revokedAt).toISOString(),
    lifetime_cap_micro_usd: k.lifetimeCap ?? null,
    monthly_cap_micro_usd: k.monthlyCap ?? null,
    lifetime_spent_micro_usd: k.lifetimeSpent,
    month_spent_micro_usd: k.monthSpent,
    held_micro_usd: k.held,
    last_used_at: k.lastUsedAt === undefined ? null : new Date(k.lastUsedAt).toISOString(),
  };
}

function apiSession(s: Session): Record<string, unknown> {
  return {
    user: { email: s.user.email, role: s.user.role, account_id: s.user.accountId, email_verified: s.user.emailVerified, totp_enabled: s.user.totpEnabled },
    csrf_token: s.csrfToken,
    second_factor: s.secondFactor,
  };
}

const isApi = (ctx: Context): boolean => ctx.path.startsWith('/api/');

function send(ctx: Context, page: Html, status = 200): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = page.text;
}

const BODY_REFUSALS: BodyRefusals = {
  tooLarge: 'The request body is too large.',
  unreadable: 'The request body could not be read.',
  notJson: 'The request body is not valid JSON.',
  notObject: 'The request body must be a JSON object.',
};

async function readBody(ctx: Context): Promise<Record<string, unknown>> {
  if (!STATE_CHANGING.has(ctx.method)) return {};
  const text = await readBodyText(ctx.req, MAX_BODY, BODY_REFUSALS);
  if (text === '') return {};
  if (ctx.is('application/json')) return parseJsonObject(text, BODY_REFUSALS);
  if (ctx.is('application/x-www-form-urlencoded')) return Object.fromEntries(new URLSearchParams(text));
  throw new DashboardError(415, 'Send application/json (API) or a form (application/x-www-form-urlencoded).');
}

export function createDashboardApp(opts: DashboardAppOptions): Koa<DashboardState> {
  const { service } = opts;
  const app = new Koa<DashboardState>();
  app.proxy = opts.trustProxy === true;
  // Only the hop our proxy appended counts: anything before it is what the client claimed.
  app.maxIpsCount = 1;

  const setSessionCookie = (ctx: Context, sessionId: string, expires: Date): void => {
    // TLS ends at the ingress in front of us: the operator's setting, not the hop's protocol (which the
    // cookies module would check, and which we do not learn from spoofable forwarding headers), decides.
    if (opts.secureCookie) ctx.cookies.secure = true;
    ctx.cookies.set(SESSION_COOKIE, sessionId, { httpOnly: true, sameSite: 'lax', secure: opts.secureCookie, expires, path: '/', overwrite: true });
  };
  const clearSessionCookie = (ctx: Context): void => {
    if (opts.secureCookie) ctx.cookies.secure = true;
    ctx.cookies.set(SESSION_COOKIE, '', { httpOnly: true, sameSite: 'lax', secure: opts.secureCookie, expires: new Date(0), path: '/', overwrite: true });
  };

  // Errors: the API answers JSON, pages an HTML page; never a stack trace or an input echoed raw.
  app.use(async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      const known = err instanceof ClientError;
      const status = known ? err.status : 500;
      const message = known ? err.message : 'The dashboard failed to handle this request; try again.';
      if (!known) process.stderr.write(`dashboard: ${ctx.method} ${redactPath(ctx.path)}: ${err instanceof Error ? err.message : String(err)}\n`);
      if (known && err.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(err.retryAfterSeconds));
      if (isApi(ctx)) {
        ctx.status = status;
        ctx.body = { error: { status, message } };
      } else send(ctx, errorPage(ctx.state.session, status, message), status);
    }
  });

  // Forms may post to the payment providers' checkout pages (a redirect after POST is checked against
  // form-action too).
  const formTargets = ["'self'", ...new Set((opts.topUps?.offered ?? []).map((p) => p.checkoutOrigin))].join(' ');
  const publicOrigin = opts.publicUrl === undefined ? undefined : new URL(opts.publicUrl).origin;
  app.use(async (ctx, next) => {
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('Referrer-Policy', 'same-origin');
    ctx.set('Content-Security-Policy', `default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; form-action ${formTargets}; frame-ancestors 'none'; base-uri 'none'`);
    // Pages may show a one-time secret: never cache any response.
    ctx.set('Cache-Control', 'no-store');
    await next();
  });

  // Our one script (copy buttons), from this origin only.
  app.use(async (ctx, next) => {
    if (ctx.path !== '/assets/dashboard.js') return next();
    ctx.type = 'text/javascript; charset=utf-8';
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.body = DASHBOARD_SCRIPT;
  });

  // The payment providers' webhooks: no session, no CSRF token, their own signature on the raw body.
  if (opts.webhooks !== undefined) app.use(opts.webhooks);

  // Fetch Metadata and Origin: a state change from another site is refused before anything else runs.
  // Requests without either header (scripts, curl) pass here and still need the CSRF token below.
  app.use(async (ctx, next) => {
    if (STATE_CHANGING.has(ctx.method)) {
      const site = ctx.get('Sec-Fetch-Site');
      if (site !== '' && site !== 'same-origin' && site !== 'none') throw new DashboardError(403, 'Cross-site request refused.');
      const origin = ctx.get('Origin');
      if (origin !== '' && origin !== (publicOrigin ?? `${ctx.protocol}://${ctx.host}`)) throw new DashboardError(403, 'Request from a foreign origin refused.');
    }
    await next();
  });

  app.use(async (ctx, next) => {
    const id = ctx.cookies.get(SESSION_COOKIE);
    if (id !== undefined && id !== '') {
      const session = await service.session(id);
      if (session !== undefined) {
        ctx.state.session = session;
        ctx.state.sessionId = id;
      }
    }
    ctx.state.body = await readBody(ctx);
    await next();
  });

  // Mailed links (password reset, address confirmation) go to the configured public address, else the
  // address this server was configured to listen on; never one taken from the request's Host header.
  const linkBase = (): string => {
    const own = publicOrigin ?? opts.selfUrl?.();
    if (own === undefined || own === '') throw new Error('the dashboard has no address for mailed links (DASHBOARD_PUBLIC_URL)');
    return own;
  };

  const open = new Router<DashboardState>();
  // Sign-in and sign-up have no session yet, so no token: the origin guard above covers them.
  open.get('/', (ctx) => ctx.redirect(ctx.state.session === undefined ? '/sign-in' : '/keys'));
  open.get('/sign-in', (ctx) => send(ctx, signInPage(service.signUpOpen)));
  open.get('/sign-up', (ctx) => {
    if (!service.signUpOpen) return send(ctx, signInPage(false, 'Sign-up is closed on this Tollgate; ask the operator for an account.'), 403);
    send(ctx, signUpPage());
  });
  open.post('/sign-in', async (ctx) => {
    const b = ctx.state.body ?? {};
    try {
      const { sessionId, session } = await service.signIn(b.email, b.password, ctx.ip, ctx.state.sessionId, b.code);
      setSessionCookie(ctx, sessionId, session.expiresAt);
      ctx.redirect('/keys');
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      if (err.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(err.retryAfterSeconds));
      send(ctx, signInPage(service.signUpOpen, err.message, typeof b.email === 'string' ? b.email : ''), err.status);
    }
  });
  open.post('/sign-up', async (ctx) => {
    const b = ctx.state.body ?? {};
    try {
      const { sessionId, session } = await service.signUp(b.email, b.password, ctx.ip, linkBase());
      if (ctx.state.sessionId !== undefined) await service.signOut(ctx.state.sessionId);
      setSessionCookie(ctx, sessionId, session.expiresAt);
      ctx.redirect('/keys');
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      if (err.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(err.retryAfterSeconds));
      send(ctx, signUpPage(err.message, typeof b.email === 'string' ? b.email : ''), err.status);
    }
  });
  open.get('/password-reset', (ctx) => send(ctx, resetRequestPage(false)));
  open.post('/password-reset', async (ctx) => {
    try {
      await service.requestPasswordReset(ctx.state.body?.email, linkBase(), ctx.ip);
      send(ctx, resetRequestPage(true));
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      if (err.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(err.retryAfterSeconds));
      send(ctx, resetRequestPage(false, err.message), err.status);
    }
  });
  open.get('/password-reset/:token', async (ctx) => send(ctx, resetPasswordPage(ctx.params.token ?? '', await service.resetTokenValid(ctx.params.token ?? ''))));
  open.post('/password-reset/:token', async (ctx) => {
    const token = ctx.params.token ?? '';
    try {
      await service.resetPassword(token, ctx.state.body?.password, ctx.ip);
      send(ctx, signInPage(service.signUpOpen, undefined, '', 'Your password is set. Sign in with it; every other session was signed out.'));
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      if (err.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(err.retryAfterSeconds));
      send(ctx, resetPasswordPage(token, await service.resetTokenValid(token), err.message), err.status);
    }
  });
  open.post('/api/password-reset', async (ctx) => {
    await service.requestPasswordReset(ctx.state.body?.email, linkBase(), ctx.ip);
    ctx.status = 202;
    ctx.body = { message: 'If that address has an account, a reset link was mailed to it.' };
  });
  open.post('/api/password-reset/:token', async (ctx) => {
    await service.resetPassword(ctx.params.token ?? '', ctx.state.body?.password, ctx.ip);
    ctx.status = 204;
  });
  // Address confirmation: the mailed link (a GET, as mail clients open it), and the same for API clients.
  open.get('/verify-email/:token', async (ctx) => {
    try {
      await service.confirmEmail(ctx.params.token ?? '');
    } catch (err) {
      // A reload of the link after it worked: say so again rather than "expired".
      if (!(err instanceof DashboardError) || ctx.state.session?.user.emailVerified !== true) throw err;
    }
    send(ctx, confirmedPage(ctx.state.session));
  });
  open.post('/api/verify-email/:token', async (ctx) => {
    await service.confirmEmail(ctx.params.token ?? '');
    ctx.status = 204;
  });
  open.post('/api/sign-in', async (ctx) => {
    const b = ctx.state.body ?? {};
    const { sessionId, session } = await service.signIn(b.email, b.password, ctx.ip, ctx.state.sessionId, b.code);
    setSessionCookie(ctx, sessionId, session.expiresAt);
    ctx.body = apiSession(session);
  });
  open.post('/api/sign-up', async (ctx) => {
    const b = ctx.state.body ?? {};
    const { sessionId, session } = await service.signUp(b.email, b.password, ctx.ip, linkBase());
    if (ctx.state.sessionId !== undefined) await service.signOut(ctx.state.sessionId);
    setSessionCookie(ctx, sessionId, session.expiresAt);
    ctx.status = 201;
    ctx.body = apiSession(session);
  });

  // Everything below needs a live session, and every state change its CSRF token
  // (form field `csrf`, or header X-CSRF-Token on the API).
  const guarded = new Router<DashboardState>();
  guarded.use(async (ctx, next) => {
    const session = ctx.state.session;
    if (session === undefined) {
      if (isApi(ctx)) throw new DashboardError(401, 'Sign in first: POST /api/sign-in with email and password.');
      if (ctx.method === 'GET') return ctx.redirect('/sign-in');
      throw new DashboardError(401, 'Your session has ended; sign in again.');
    }
    if (STATE_CHANGING.has(ctx.method)) {
      const presented = isApi(ctx) ? ctx.get('X-CSRF-Token') : ctx.state.body?.csrf;
      if (!DashboardService.csrfMatches(session, presented)) throw new DashboardError(403, 'Missing or wrong CSRF token; reload the page and try again.');
    }
    await next();
  });
  const who = (ctx: Ctx): Session => ctx.state.session as Session;
  const keyId = (ctx: Ctx): string => ctx.params.keyId ?? '';

  guarded.post('/sign-out', async (ctx) => {
    await service.signOut(ctx.state.sessionId ?? '');
    clearSessionCookie(ctx);
    ctx.redirect('/sign-in');
  });
  guarded.post('/sign-out-everywhere', async (ctx) => {
    await service.signOutEverywhere(who(ctx).user);
    clearSessionCookie(ctx);
    ctx.redirect('/sign-in');
  });
  const clearReveal = (ctx: Context): void => {
    if (opts.secureCookie) ctx.cookies.secure = true;
    ctx.cookies.set(REVEAL_COOKIE, '', { httpOnly: true, sameSite: 'strict', secure: opts.secureCookie, expires: new Date(0), path: '/keys', overwrite: true });
  };
  guarded.get('/keys', async (ctx) => {
    const s = who(ctx);
    // A key just made (post-redirect-get): its secret is shown by this one response, then the sealed
    // copy is gone, so a reload shows the list and makes nothing.
    const sealed = ctx.cookies.get(REVEAL_COOKIE);
    const reveal = sealed === undefined || sealed === '' ? undefined : await openReveal(service.db, sealed, ctx.state.sessionId ?? '');
    if (sealed !== undefined && sealed !== '') clearReveal(ctx);
    const notice = ctx.query.sent === 'confirmation' ? 'A new confirmation link is on its way.' : undefined;
    send(ctx, keysPage(s, await service.listKeys(s.user), { ...(reveal === undefined ? {} : { reveal }), ...(notice === undefined ? {} : { notice }) }));
  });
  guarded.post('/keys', async (ctx) => {
    const s = who(ctx);
    const b = ctx.state.body ?? {};
    try {
      const { key, secret } = await service.createKey(s.user, b.name, capsFromInput(b));
      // Sealed in the record under a key only this browser gets (never the secret in a redirect target,
      // a log or a cache), and shown by the GET the redirect leads to.
      const cookie = await sealReveal(service.db, ctx.state.sessionId ?? '', { name: key.name, secret });
      if (opts.secureCookie) ctx.cookies.secure = true;
      ctx.cookies.set(REVEAL_COOKIE, cookie, { httpOnly: true, sameSite: 'strict', secure: opts.secureCookie, maxAge: 5 * 60_000, path: '/keys', overwrite: true });
      ctx.status = 303;
      ctx.redirect('/keys');
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      send(ctx, keysPage(s, await service.listKeys(s.user), { error: err.message }), err.status);
    }
  });
  guarded.get('/keys/:keyId/edit', async (ctx) => send(ctx, editCapsPage(who(ctx), await service.getKey(who(ctx).user, keyId(ctx)))));
  guarded.post('/keys/:keyId/caps', async (ctx) => {
    const s = who(ctx);
    const key = await service.getKey(s.user, keyId(ctx));
    try {
      await service.setCaps(s.user, key.id, capsFromInput(ctx.state.body ?? {}));
      ctx.redirect('/keys');
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      send(ctx, editCapsPage(s, key, err.message), err.status);
    }
  });
  guarded.get('/keys/:keyId/revoke', async (ctx) => send(ctx, revokePage(who(ctx), await service.getKey(who(ctx).user, keyId(ctx)))));
  guarded.post('/keys/:keyId/revoke', async (ctx) => {
    await service.revokeKey(who(ctx).user, keyId(ctx));
    ctx.redirect('/keys');
  });

  // Address confirmation, sent again on request.
  guarded.post('/resend-verification', async (ctx) => {
    await service.resendConfirmation(who(ctx).user, linkBase(), ctx.ip);
    ctx.status = 303;
    ctx.redirect('/keys?sent=confirmation');
  });
  guarded.post('/api/resend-verification', async (ctx) => {
    await service.resendConfirmation(who(ctx).user, linkBase(), ctx.ip);
    ctx.status = 202;
    ctx.body = { message: who(ctx).user.emailVerified ? 'This address is confirmed already.' : 'A new confirmation link was mailed.' };
  });
  // TOTP enrolment (any user; admins may be required to have it, DASHBOARD_ADMIN_REQUIRE_TOTP).
  guarded.get('/account/two-factor', (ctx) => {
    const s = who(ctx);
    send(ctx, twoFactorPage(s, s.user.totpEnabled ? undefined : service.totpEnrolment(s.user), { requiredForAdmin: service.adminRequiresTotp }));
  });
  guarded.post('/account/two-factor', async (ctx) => {
    const s = who(ctx);
    const b = ctx.state.body ?? {};
    try {
      await service.enableTotp(s.user, ctx.state.sessionId ?? '', b.secret, b.code);
      ctx.status = 303;
      ctx.redirect('/account/two-factor');
    } catch (err) {
      if (!(err instanceof DashboardError) || typeof b.secret !== 'string') throw err;
      send(ctx, twoFactorPage(s, { secret: b.secret, uri: '' }, { error: err.message, requiredForAdmin: service.adminRequiresTotp }), err.status);
    }
  });

  // Money comes in only to a confirmed address's account (the top-up routes are balance-routes').
  const TOP_UP_STARTS = new Set(['/balance/quote', '/balance/top-ups', '/api/top-ups', '/api/top-ups/quote', '/balance/auto-top-up', '/balance/auto-top-up/card']);
  guarded.use(async (ctx, next) => {
    if (ctx.method === 'POST' && TOP_UP_STARTS.has(ctx.path)) DashboardService.requireConfirmed(who(ctx).user);
    await next();
  });
  balanceRoutes(guarded, { service, topUps: opts.topUps, autoTopUps: opts.autoTopUps, send });
  const tickets = new RefundTickets({ db: service.db, accounts: service.accounts, supportEmail: opts.supportEmail ?? 'support@tollgate.local' });
  usageRoutes(guarded, { service, db: service.db, tickets, send });
  adminRoutes(guarded, {
    accounts: service.accounts,
    requireTotp: service.adminRequiresTotp,
    tickets,
    topUps: opts.topUps,
    send,
    ...(opts.reconcile === undefined ? {} : { reconcile: opts.reconcile }),
  });

  guarded.get('/api/session', (ctx) => {
    ctx.body = { ...apiSession(who(ctx)), expires_at: who(ctx).expiresAt.toISOString() };
  });
  guarded.post('/api/sign-out', async (ctx) => {
    await service.signOut(ctx.state.sessionId ?? '');
    clearSessionCookie(ctx);
    ctx.status = 204;
  });
  guarded.post('/api/sign-out-everywhere', async (ctx) => {
    const ended = await service.signOutEverywhere(who(ctx).user);
    clearSessionCookie(ctx);
    ctx.body = { sessions_ended: ended };
  });
  guarded.get('/api/keys', async (ctx) => {
    ctx.body = { keys: (await service.listKeys(who(ctx).user)).map(apiKey) };
  });
  guarded.post('/api/keys', async (ctx) => {
    const b = ctx.state.body ?? {};
    const { key, secret } = await service.createKey(who(ctx).user, b.name, capsFromInput(b));
    ctx.status = 201;
    ctx.body = { key: apiKey(key), secret };
  });
  guarded.get('/api/keys/:keyId', async (ctx) => {
    ctx.body = { key: apiKey(await service.getKey(who(ctx).user, keyId(ctx))) };
  });
  guarded.patch('/api/keys/:keyId', async (ctx) => {
    ctx.body = { key: apiKey(await service.setCaps(who(ctx).user, keyId(ctx), capsFromInput(ctx.state.body ?? {}))) };
  });
  guarded.post('/api/keys/:keyId/revoke', async (ctx) => {
    ctx.body = { key: apiKey(await service.revokeKey(who(ctx).user, keyId(ctx))) };
  });

  app.use(open.routes());
  app.use(open.allowedMethods());
  app.use(guarded.routes());
  app.use(guarded.allowedMethods());
  app.use((ctx) => {
    throw new DashboardError(404, isApi(ctx) ? `No route ${ctx.method} ${ctx.path}.` : 'There is no such page.');
  });
  return app;
}
