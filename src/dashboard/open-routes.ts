// The routes open without a session: sign-in and sign-up (pages and API), password reset, the
// confirmation of an address, and an invitation's link. They have no session yet, so no CSRF token:
// the cross-site guard covers them. Sign-in and sign-up may carry an invitation's token: the
// invitation is then accepted with the address just proven, and the session acts on the organization.
import type Router from '@koa/router';
import type { Context } from 'koa';
import { DashboardError } from './errors.js';
import { invitationPage } from './org-pages.js';
import { confirmedPage, homeOf, resetPasswordPage, resetRequestPage, signInPage, signUpPage } from './pages.js';
import type { DashboardService } from './service.js';
import type { Session } from './sessions.js';
import { apiSession, send, type DashboardState, type SessionCookie } from './state.js';
import { normalizeEmail } from './users.js';

export interface OpenDeps {
  service: DashboardService;
  cookie: SessionCookie;
  /** The base of mailed links (the configured public address, else this server's own). */
  linkBase: () => string;
}

const invitationOf = (body: Record<string, unknown>): string | undefined => (typeof body.invitation === 'string' && body.invitation !== '' ? body.invitation : undefined);

/**
 * Accepts the invitation `token` for the session's user (whose address it must be), and makes the
 * session act on the organization. The session as it is now.
 */
async function joinWith(service: DashboardService, token: string, sessionId: string, session: Session): Promise<Session> {
  const joined = await service.invitations.accept(token, session.user);
  await service.sessions.choose(sessionId, joined.accountId);
  return (await service.sessions.load(sessionId)) ?? session;
}

export function signInRoutes(open: Router<DashboardState>, deps: OpenDeps): void {
  const { service, cookie, linkBase } = deps;
  const { identity } = service;
  open.get('/', (ctx) => ctx.redirect(ctx.state.session === undefined ? '/sign-in' : homeOf(ctx.state.session)));
  open.get('/sign-in', (ctx) => send(ctx, signInPage(identity.signUpOpen, undefined, '', undefined, service.sso?.button)));
  open.get('/sign-up', (ctx) => {
    if (!identity.signUpOpen) return send(ctx, signInPage(false, 'Sign-up is closed on this Tollgate; ask the operator for an account.', '', undefined, service.sso?.button), 403);
    send(ctx, signUpPage());
  });
  /** A refused sign-in or sign-up re-renders its form (the invitation's, when it came from one). */
  const refused = async (ctx: Context, err: unknown, form: 'sign-in' | 'sign-up', invitation: string | undefined): Promise<void> => {
    if (!(err instanceof DashboardError)) throw err;
    if (err.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(err.retryAfterSeconds));
    const b = (ctx as Context & { state: DashboardState }).state.body ?? {};
    const email = typeof b.email === 'string' ? b.email : '';
    if (invitation !== undefined) {
      const offer = await service.invitations.offer(invitation);
      return send(ctx, invitationPage({ token: invitation, offer, error: err.message, form }), err.status);
    }
    send(ctx, form === 'sign-in' ? signInPage(identity.signUpOpen, err.message, email, undefined, service.sso?.button) : signUpPage(err.message, email), err.status);
  };
  open.post('/sign-in', async (ctx) => {
    const b = ctx.state.body ?? {};
    const invitation = invitationOf(b);
    try {
      const { sessionId, session } = await identity.signIn(b.email, b.password, ctx.ip, ctx.state.sessionId, b.code);
      cookie.set(ctx, sessionId, session.expiresAt);
      if (invitation === undefined) return ctx.redirect('/keys');
      // Signed in either way; an invitation for another address says so on its own page.
      try {
        await joinWith(service, invitation, sessionId, session);
      } catch (err) {
        if (!(err instanceof DashboardError)) throw err;
        return ctx.redirect(`/invitations/${encodeURIComponent(invitation)}`);
      }
      ctx.status = 303;
      ctx.redirect('/members?joined=1');
    } catch (err) {
      await refused(ctx, err, 'sign-in', invitation);
    }
  });
  open.post('/sign-up', async (ctx) => {
    const b = ctx.state.body ?? {};
    const invitation = invitationOf(b);
    try {
      const invited = invitation === undefined ? false : await invitedAddress(service, invitation, b.email);
      const { sessionId, session } = await identity.signUp(b.email, b.password, ctx.ip, linkBase(), { invited });
      if (ctx.state.sessionId !== undefined) await service.sessions.signOut(ctx.state.sessionId);
      cookie.set(ctx, sessionId, session.expiresAt);
      if (invitation === undefined) return ctx.redirect('/keys');
      await joinWith(service, invitation, sessionId, session);
      ctx.status = 303;
      ctx.redirect('/members?joined=1');
    } catch (err) {
      await refused(ctx, err, 'sign-up', invitation);
    }
  });
  open.post('/api/sign-in', async (ctx) => {
    const b = ctx.state.body ?? {};
    const invitation = invitationOf(b);
    const opened = await identity.signIn(b.email, b.password, ctx.ip, ctx.state.sessionId, b.code);
    cookie.set(ctx, opened.sessionId, opened.session.expiresAt);
    ctx.body = apiSession(invitation === undefined ? opened.session : await joinWith(service, invitation, opened.sessionId, opened.session));
  });
  open.post('/api/sign-up', async (ctx) => {
    const b = ctx.state.body ?? {};
    const invitation = invitationOf(b);
    const invited = invitation === undefined ? false : await invitedAddress(service, invitation, b.email);
    const opened = await identity.signUp(b.email, b.password, ctx.ip, linkBase(), { invited });
    if (ctx.state.sessionId !== undefined) await service.sessions.signOut(ctx.state.sessionId);
    cookie.set(ctx, opened.sessionId, opened.session.expiresAt);
    ctx.status = 201;
    ctx.body = apiSession(invitation === undefined ? opened.session : await joinWith(service, invitation, opened.sessionId, opened.session));
  });
  // An invitation's mailed link: what it offers, and the way in (accept, sign in, or sign up with that address).
  open.get('/invitations/:token', async (ctx) => {
    const token = ctx.params.token ?? '';
    const offer = await service.invitations.offer(token);
    send(ctx, invitationPage({ token, offer, ...(ctx.state.session === undefined ? {} : { session: ctx.state.session }) }));
  });
}

/** True once the invitation still works and is for this address (which the mailed link then proves); refused otherwise. */
async function invitedAddress(service: DashboardService, token: string, email: unknown): Promise<boolean> {
  const offer = await service.invitations.offer(token);
  if (normalizeEmail(email) !== offer.email) throw new DashboardError(403, `This invitation is for ${offer.email}: sign up with that address.`);
  return true;
}

export function recoveryRoutes(open: Router<DashboardState>, { service, linkBase }: OpenDeps): void {
  const { identity } = service;
  open.get('/password-reset', (ctx) => send(ctx, resetRequestPage(false)));
  open.post('/password-reset', async (ctx) => {
    try {
      await identity.requestPasswordReset(ctx.state.body?.email, linkBase(), ctx.ip);
      send(ctx, resetRequestPage(true));
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      if (err.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(err.retryAfterSeconds));
      send(ctx, resetRequestPage(false, err.message), err.status);
    }
  });
  open.get('/password-reset/:token', async (ctx) => send(ctx, resetPasswordPage(ctx.params.token ?? '', await identity.resetTokenState(ctx.params.token ?? ''))));
  open.post('/password-reset/:token', async (ctx) => {
    const token = ctx.params.token ?? '';
    try {
      await identity.resetPassword(token, ctx.state.body?.password, ctx.ip, ctx.state.body?.code);
      send(ctx, signInPage(identity.signUpOpen, undefined, '', 'Your password is set. Sign in with it; every other session was signed out.', service.sso?.button));
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      if (err.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(err.retryAfterSeconds));
      send(ctx, resetPasswordPage(token, await identity.resetTokenState(token), err.message), err.status);
    }
  });
  open.post('/api/password-reset', async (ctx) => {
    await identity.requestPasswordReset(ctx.state.body?.email, linkBase(), ctx.ip);
    ctx.status = 202;
    ctx.body = { message: 'If that address has an account, a reset link was mailed to it.' };
  });
  open.post('/api/password-reset/:token', async (ctx) => {
    await identity.resetPassword(ctx.params.token ?? '', ctx.state.body?.password, ctx.ip, ctx.state.body?.code);
    ctx.status = 204;
  });
  // Address confirmation: the mailed link (a GET, as mail clients open it), and the same for API clients.
  open.get('/verify-email/:token', async (ctx) => {
    try {
      await identity.confirmEmail(ctx.params.token ?? '');
    } catch (err) {
      // A reload of the link after it worked: say so again rather than "expired".
      if (!(err instanceof DashboardError) || ctx.state.session?.user.emailVerified !== true) throw err;
    }
    send(ctx, confirmedPage(ctx.state.session));
  });
  open.post('/api/verify-email/:token', async (ctx) => {
    await identity.confirmEmail(ctx.params.token ?? '');
    ctx.status = 204;
  });
}
