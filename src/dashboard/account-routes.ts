// The signed-in holder's own account: signing out (here or everywhere), the session as the API sees it,
// the address confirmation sent again, and two-factor sign-in.
import type Router from '@koa/router';
import { twoFactorPage } from './pages.js';
import { DashboardError, type DashboardService } from './service.js';
import { apiSession, send, who, type DashboardState, type SessionCookie } from './state.js';

export function accountRoutes(guarded: Router<DashboardState>, deps: { service: DashboardService; cookie: SessionCookie; linkBase: () => string }): void {
  const { service, cookie, linkBase } = deps;
  guarded.post('/sign-out', async (ctx) => {
    await service.signOut(ctx.state.sessionId ?? '');
    cookie.clear(ctx);
    ctx.redirect('/sign-in');
  });
  guarded.post('/sign-out-everywhere', async (ctx) => {
    await service.signOutEverywhere(who(ctx).user);
    cookie.clear(ctx);
    ctx.redirect('/sign-in');
  });
  guarded.get('/api/session', (ctx) => {
    ctx.body = { ...apiSession(who(ctx)), expires_at: who(ctx).expiresAt.toISOString() };
  });
  guarded.post('/api/sign-out', async (ctx) => {
    await service.signOut(ctx.state.sessionId ?? '');
    cookie.clear(ctx);
    ctx.status = 204;
  });
  guarded.post('/api/sign-out-everywhere', async (ctx) => {
    const ended = await service.signOutEverywhere(who(ctx).user);
    cookie.clear(ctx);
    ctx.body = { sessions_ended: ended };
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
}
