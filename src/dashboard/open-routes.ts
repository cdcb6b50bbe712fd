// The routes open without a session: sign-in and sign-up (pages and API), password reset and the
// confirmation of an address. They have no session yet, so no CSRF token: the cross-site guard covers them.
import type Router from '@koa/router';
import { confirmedPage, resetPasswordPage, resetRequestPage, signInPage, signUpPage } from './pages.js';
import { DashboardError, type DashboardService } from './service.js';
import { apiSession, send, type DashboardState, type SessionCookie } from './state.js';

export interface OpenDeps {
  service: DashboardService;
  cookie: SessionCookie;
  /** The base of mailed links (the configured public address, else this server's own). */
  linkBase: () => string;
}

export function signInRoutes(open: Router<DashboardState>, { service, cookie, linkBase }: OpenDeps): void {
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
      cookie.set(ctx, sessionId, session.expiresAt);
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
      cookie.set(ctx, sessionId, session.expiresAt);
      ctx.redirect('/keys');
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      if (err.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(err.retryAfterSeconds));
      send(ctx, signUpPage(err.message, typeof b.email === 'string' ? b.email : ''), err.status);
    }
  });
  open.post('/api/sign-in', async (ctx) => {
    const b = ctx.state.body ?? {};
    const { sessionId, session } = await service.signIn(b.email, b.password, ctx.ip, ctx.state.sessionId, b.code);
    cookie.set(ctx, sessionId, session.expiresAt);
    ctx.body = apiSession(session);
  });
  open.post('/api/sign-up', async (ctx) => {
    const b = ctx.state.body ?? {};
    const { sessionId, session } = await service.signUp(b.email, b.password, ctx.ip, linkBase());
    if (ctx.state.sessionId !== undefined) await service.signOut(ctx.state.sessionId);
    cookie.set(ctx, sessionId, session.expiresAt);
    ctx.status = 201;
    ctx.body = apiSession(session);
  });
}

export function recoveryRoutes(open: Router<DashboardState>, { service, linkBase }: OpenDeps): void {
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
  open.get('/password-reset/:token', async (ctx) => send(ctx, resetPasswordPage(ctx.params.token ?? '', await service.resetTokenState(ctx.params.token ?? ''))));
  open.post('/password-reset/:token', async (ctx) => {
    const token = ctx.params.token ?? '';
    try {
      await service.resetPassword(token, ctx.state.body?.password, ctx.ip, ctx.state.body?.code);
      send(ctx, signInPage(service.signUpOpen, undefined, '', 'Your password is set. Sign in with it; every other session was signed out.'));
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      if (err.retryAfterSeconds !== undefined) ctx.set('Retry-After', String(err.retryAfterSeconds));
      send(ctx, resetPasswordPage(token, await service.resetTokenState(token), err.message), err.status);
    }
  });
  open.post('/api/password-reset', async (ctx) => {
    await service.requestPasswordReset(ctx.state.body?.email, linkBase(), ctx.ip);
    ctx.status = 202;
    ctx.body = { message: 'If that address has an account, a reset link was mailed to it.' };
  });
  open.post('/api/password-reset/:token', async (ctx) => {
    await service.resetPassword(ctx.params.token ?? '', ctx.state.body?.password, ctx.ip, ctx.state.body?.code);
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
}
