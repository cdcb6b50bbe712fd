// The dashboard's middleware, each one job, composed once by app.ts in this order: errors, security
// headers, the script asset, (the webhooks), the cross-site guard, the session and body, the acting
// user for the audit log, then the open routes, the session guard and the guarded routes, and the 404.
import { existsSync, readFileSync } from 'node:fs';
import type Koa from 'koa';
import type { Context, Next } from 'koa';
import { ClientError } from '../http/client-error.js';
import { parseJsonObject, readBodyText, type BodyRefusals } from '../http/read-body.js';
import { newRequestId } from '../http/request-context.js';
import { asActor } from '../record/change-actor.js';
import { errorPage } from './pages.js';
import { DashboardError } from './errors.js';
import { Sessions } from './sessions.js';
import { isApi, send, STATE_CHANGING, SESSION_COOKIE, type DashboardState } from './state.js';

type Middleware = Koa.Middleware<DashboardState>;

/** Paths that carry a secret token: logged with the token replaced. */
const TOKEN_PATH = /^(\/(?:api\/)?(?:password-reset|verify-email|invitations)\/)[^/]+/;
export const redactPath = (path: string): string => path.replace(TOKEN_PATH, '$1[redacted]');

/** Errors: the API answers JSON, pages an HTML page; never a stack trace or an input echoed raw. */
export function answerErrors(): Middleware {
  return async (ctx, next) => {
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
  };
}

/** Forms may post to the payment providers' checkout pages (`formTargets`, a redirect after POST is checked against form-action too). */
export function securityHeaders(formTargets: readonly string[]): Middleware {
  const targets = ["'self'", ...new Set(formTargets)].join(' ');
  return async (ctx, next) => {
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.set('X-Frame-Options', 'DENY');
    ctx.set('Referrer-Policy', 'same-origin');
    ctx.set('Content-Security-Policy', `default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; form-action ${targets}; frame-ancestors 'none'; base-uri 'none'`);
    // Pages may show a one-time secret: never cache any response.
    ctx.set('Cache-Control', 'no-store');
    await next();
  };
}

// Beside this module when run from source; from the compiled tree (dist/src/dashboard) the sources'.
function readAsset(file: string): string {
  let url = new URL(`./assets/${file}`, import.meta.url);
  if (!existsSync(url)) url = new URL(`../../../src/dashboard/assets/${file}`, import.meta.url);
  return readFileSync(url, 'utf8');
}
const DASHBOARD_SCRIPT = readAsset('dashboard.js');

/** Our one script (copy buttons), from this origin only. */
export function scriptAsset(): Middleware {
  return async (ctx, next) => {
    if (ctx.path !== '/assets/dashboard.js') return next();
    ctx.type = 'text/javascript; charset=utf-8';
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.body = DASHBOARD_SCRIPT;
  };
}

/**
 * Fetch Metadata and Origin: a state change from another site is refused before anything else runs.
 * Requests without either header (scripts, curl) pass here and still need the CSRF token.
 */
export function refuseCrossSite(publicOrigin: string | undefined): Middleware {
  return async (ctx, next) => {
    if (STATE_CHANGING.has(ctx.method)) {
      const site = ctx.get('Sec-Fetch-Site');
      if (site !== '' && site !== 'same-origin' && site !== 'none') throw new DashboardError(403, 'Cross-site request refused.');
      const origin = ctx.get('Origin');
      if (origin !== '' && origin !== (publicOrigin ?? `${ctx.protocol}://${ctx.host}`)) throw new DashboardError(403, 'Request from a foreign origin refused.');
    }
    await next();
  };
}

const MAX_BODY = 64 * 1024;

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

/** The session its cookie names (if live) and the body (JSON or a form), into ctx.state. */
export function loadSessionAndBody(sessions: Sessions): Middleware {
  return async (ctx, next) => {
    const id = ctx.cookies.get(SESSION_COOKIE);
    if (id !== undefined && id !== '') {
      const session = await sessions.load(id);
      if (session !== undefined) {
        ctx.state.session = session;
        ctx.state.sessionId = id;
      }
    }
    ctx.state.body = await readBody(ctx);
    await next();
  };
}

/**
 * Who the audit log names for every change this request makes (src/record/change-actor.ts): the
 * signed-in user, or a visitor with no id (sign-up, sign-in, reset), with the client's address (the
 * trust-proxy setting decides which), user agent and a request id, which the answer carries as
 * X-Request-Id so an entry can be matched to the request that wrote it.
 */
export function changeActor(): Middleware {
  return (ctx, next) => {
    const requestId = newRequestId();
    ctx.set('X-Request-Id', requestId);
    const user = ctx.state.session?.user;
    const userAgent = ctx.get('user-agent');
    return asActor(
      { kind: 'user', ...(user === undefined ? {} : { id: user.id, label: user.email }), address: ctx.ip, ...(userAgent === '' ? {} : { userAgent }), requestId },
      () => next(),
    );
  };
}

/** What follows needs a live session, and every state change its CSRF token (form field `csrf`, or header X-CSRF-Token on the API). */
export function requireSession(): Middleware {
  return async (ctx, next: Next) => {
    const session = ctx.state.session;
    if (session === undefined) {
      if (isApi(ctx)) throw new DashboardError(401, 'Sign in first: POST /api/sign-in with email and password.');
      if (ctx.method === 'GET') return ctx.redirect('/sign-in');
      throw new DashboardError(401, 'Your session has ended; sign in again.');
    }
    if (STATE_CHANGING.has(ctx.method)) {
      const presented = isApi(ctx) ? ctx.get('X-CSRF-Token') : ctx.state.body?.csrf;
      if (!Sessions.csrfMatches(session, presented)) throw new DashboardError(403, 'Missing or wrong CSRF token; reload the page and try again.');
    }
    await next();
  };
}

/** Whatever no route answered. */
export function notFound(): Middleware {
  return (ctx) => {
    throw new DashboardError(404, isApi(ctx) ? `No route ${ctx.method} ${ctx.path}.` : 'There is no such page.');
  };
}
