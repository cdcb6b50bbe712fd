// The dashboard's Koa app: session loading, the cross-origin and CSRF guards, then pages and /api routes
// over one DashboardService. Middleware is composed once here; the session travels in ctx.state.
import Router from '@koa/router';
import Koa, { type Context } from 'koa';
import getRawBody from 'raw-body';
import type { Html } from './html.js';
import { editCapsPage, errorPage, keysPage, revokePage, signInPage, signUpPage } from './pages.js';
import { capsFromInput, DashboardError, DashboardService, type KeyView, type Session } from './service.js';

export interface DashboardState {
  session?: Session;
  sessionId?: string;
  body?: Record<string, unknown>;
}

type Ctx = Koa.ParameterizedContext<DashboardState> & { params: Record<string, string> };

export interface DashboardAppOptions {
  service: DashboardService;
  secureCookie: boolean;
}

export const SESSION_COOKIE = 'tg_session';
const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const MAX_BODY = '64kb';

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
  };
}

const isApi = (ctx: Context): boolean => ctx.path.startsWith('/api/');

function send(ctx: Context, page: Html, status = 200): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = page.text;
}

async function readBody(ctx: Context): Promise<Record<string, unknown>> {
  if (!STATE_CHANGING.has(ctx.method)) return {};
  const text = await getRawBody(ctx.req, { limit: MAX_BODY, encoding: 'utf8' }).catch((err: unknown) => {
    const status = (err as { status?: number }).status;
    throw new DashboardError(status === 413 ? 413 : 400, status === 413 ? 'The request body is too large.' : 'The request body could not be read.');
  });
  if (text === '') return {};
  if (ctx.is('application/json')) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      throw new DashboardError(400, 'The request body is not valid JSON.');
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new DashboardError(400, 'The request body must be a JSON object.');
    return parsed as Record<string, unknown>;
  }
  if (ctx.is('application/x-www-form-urlencoded')) return Object.fromEntries(new URLSearchParams(text));
  throw new DashboardError(415, 'Send application/json (API) or a form (application/x-www-form-urlencoded).');
}

export function createDashboardApp(opts: DashboardAppOptions): Koa<DashboardState> {
  const { service } = opts;
  const app = new Koa<DashboardState>();
  app.proxy = false;

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
      const known = err instanceof DashboardError;
      const status = known ? err.status : 500;
      const message = known ? err.message : 'The dashboard failed to handle this request; try again.';
      if (!known) process.stderr.write(`dashboard: ${ctx.method} ${ctx.path}: ${err instanceof Error ? err.message : String(err)}\n`);
      if (known && err.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(err.retryAfterSeconds));
      if (isApi(ctx)) {
        ctx.status = status;
        ctx.body = { error: { status, message } };
      } else send(ctx, errorPage(ctx.state.session, status, message), status);
    }
  });

  app.use(async (ctx, next) => {
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('Referrer-Policy', 'same-origin');
    ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'");
    // Pages may show a one-time secret: never cache any response.
    ctx.set('Cache-Control', 'no-store');
    await next();
  });

  // Fetch Metadata and Origin: a state change from another site is refused before anything else runs.
  // Requests without either header (scripts, curl) pass here and still need the CSRF token below.
  app.use(async (ctx, next) => {
    if (STATE_CHANGING.has(ctx.method)) {
      const site = ctx.get('Sec-Fetch-Site');
      if (site !== '' && site !== 'same-origin' && site !== 'none') throw new DashboardError(403, 'Cross-site request refused.');
      const origin = ctx.get('Origin');
      if (origin !== '' && origin !== `${ctx.protocol}://${ctx.host}`) throw new DashboardError(403, 'Request from a foreign origin refused.');
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
      const { sessionId, session } = await service.signIn(b.email, b.password, ctx.ip, ctx.state.sessionId);
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
      const { sessionId, session } = await service.signUp(b.email, b.password);
      if (ctx.state.sessionId !== undefined) await service.signOut(ctx.state.sessionId);
      setSessionCookie(ctx, sessionId, session.expiresAt);
      ctx.redirect('/keys');
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      send(ctx, signUpPage(err.message, typeof b.email === 'string' ? b.email : ''), err.status);
    }
  });
  open.post('/api/sign-in', async (ctx) => {
    const b = ctx.state.body ?? {};
    const { sessionId, session } = await service.signIn(b.email, b.password, ctx.ip, ctx.state.sessionId);
    setSessionCookie(ctx, sessionId, session.expiresAt);
    ctx.body = { user: { email: session.user.email, role: session.user.role, account_id: session.user.accountId }, csrf_token: session.csrfToken };
  });
  open.post('/api/sign-up', async (ctx) => {
    const b = ctx.state.body ?? {};
    const { sessionId, session } = await service.signUp(b.email, b.password);
    if (ctx.state.sessionId !== undefined) await service.signOut(ctx.state.sessionId);
    setSessionCookie(ctx, sessionId, session.expiresAt);
    ctx.status = 201;
    ctx.body = { user: { email: session.user.email, role: session.user.role, account_id: session.user.accountId }, csrf_token: session.csrfToken };
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
  guarded.get('/keys', async (ctx) => send(ctx, keysPage(who(ctx), await service.listKeys(who(ctx).user))));
  guarded.post('/keys', async (ctx) => {
    const s = who(ctx);
    const b = ctx.state.body ?? {};
    try {
      const { key, secret } = await service.createKey(s.user, b.name, capsFromInput(b));
      // The secret goes into this one response only (never a redirect target, a log or a cache).
      send(ctx, keysPage(s, await service.listKeys(s.user), { reveal: { name: key.name, secret } }), 201);
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

  guarded.get('/api/session', (ctx) => {
    const s = who(ctx);
    ctx.body = { user: { email: s.user.email, role: s.user.role, account_id: s.user.accountId }, csrf_token: s.csrfToken, expires_at: s.expiresAt.toISOString() };
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
