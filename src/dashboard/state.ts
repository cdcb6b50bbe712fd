// What the dashboard's route modules share: the request state (session, the acting member, body), the
// HTML answer and the session cookie. Its own module, so route modules and the app that composes them
// do not import each other.
import type Koa from 'koa';
import type { Context } from 'koa';
import type { Actor } from './actor.js';
import type { Html } from './html.js';
import { accountLabel, type Membership } from './memberships.js';
import type { Session } from './sessions.js';

export interface DashboardState {
  session?: Session;
  sessionId?: string;
  /** The member acting on the session's account, once a route's permission check let them through (route-guards.ts). */
  actor?: Actor;
  body?: Record<string, unknown>;
}

export type Ctx = Koa.ParameterizedContext<DashboardState> & { params: Record<string, string> };

export const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export const isApi = (ctx: Context): boolean => ctx.path.startsWith('/api/');

export function send(ctx: Context, page: Html, status = 200): void {
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = page.text;
}

/** The session of a guarded route (the guard has checked there is one). */
export const who = (ctx: Context): Session => (ctx as Ctx).state.session as Session;

/** The acting member of a route whose permission was checked; a route without the check cannot get one. */
export function acting(ctx: Context): Actor {
  const actor = (ctx as Ctx).state.actor;
  if (actor === undefined) throw new Error(`${ctx.method} ${ctx.path} reads the acting member without a permission check`);
  return actor;
}

export const SESSION_COOKIE = 'tg_session';

export interface SessionCookie {
  set(ctx: Context, sessionId: string, expires: Date): void;
  clear(ctx: Context): void;
}

export function sessionCookie(secure: boolean): SessionCookie {
  // TLS ends at the ingress in front of us: the operator's setting, not the hop's protocol (which the
  // cookies module would check, and which we do not learn from spoofable forwarding headers), decides.
  const write = (ctx: Context, value: string, expires: Date): void => {
    if (secure) ctx.cookies.secure = true;
    ctx.cookies.set(SESSION_COOKIE, value, { httpOnly: true, sameSite: 'lax', secure, expires, path: '/', overwrite: true });
  };
  return { set: write, clear: (ctx) => write(ctx, '', new Date(0)) };
}

/** An account the user belongs to, as the API shows it. */
export function apiMembership(m: Membership): Record<string, unknown> {
  return { id: m.accountId, name: accountLabel(m), kind: m.organization === undefined ? 'personal' : 'organization', role: m.role };
}

/** The session as the API shows it. */
export function apiSession(s: Session): Record<string, unknown> {
  return {
    user: { id: s.user.id, email: s.user.email, role: s.user.role, account_id: s.user.accountId, email_verified: s.user.emailVerified, totp_enabled: s.user.totpEnabled },
    csrf_token: s.csrfToken,
    second_factor: s.secondFactor,
    account: s.member === undefined ? null : apiMembership(s.member),
    accounts: s.memberships.map(apiMembership),
  };
}
