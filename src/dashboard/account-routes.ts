// The signed-in holder's own account: signing out (here or everywhere), the session as the API sees it,
// the address confirmation sent again, and two-factor sign-in with its recovery codes.
import type Router from '@koa/router';
import type { Context } from 'koa';
import { recoveryCodesPage, twoFactorPage, type TwoFactorState } from './security-pages.js';
import { DashboardError, type DashboardService } from './service.js';
import { apiSession, send, who, type DashboardState, type SessionCookie } from './state.js';
import { TOTP_SECRET } from './totp.js';

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
  twoFactorRoutes(guarded, service);
}

/** The Security page: two-factor sign-in on (password and a code), recovery codes, off (password and a code or recovery code). */
function twoFactorRoutes(guarded: Router<DashboardState>, service: DashboardService): void {
  const DONE: Record<string, string> = { off: 'Two-factor sign-in is off: signing in asks for your password only.' };
  const page = async (ctx: Context, opts: { error?: string; notice?: string; secret?: string } = {}, status = 200): Promise<void> => {
    const s = who(ctx);
    // After a refused enrolment, the secret the holder already added to the app is kept.
    const state: TwoFactorState = s.user.totpEnabled
      ? { on: true, codesLeft: await service.recoveryCodesLeft(s.user) }
      : { on: false, enrolment: opts.secret === undefined ? service.totpEnrolment(s.user) : { secret: opts.secret, uri: '' } };
    send(ctx, twoFactorPage(s, state, { requiredForAdmin: service.adminRequiresTotp, ...(opts.error === undefined ? {} : { error: opts.error }), ...(opts.notice === undefined ? {} : { notice: opts.notice }) }), status);
  };
  /** A refusal of the service re-renders the page with its message; anything else is the app's error. */
  const orPage = async (ctx: Context, work: () => Promise<void>, secret?: string): Promise<void> => {
    try {
      await work();
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      await page(ctx, { error: err.message, ...(secret === undefined ? {} : { secret }) }, err.status);
    }
  };
  guarded.get('/account/two-factor', async (ctx) => {
    const done = typeof ctx.query.done === 'string' ? DONE[ctx.query.done] : undefined;
    await page(ctx, done === undefined ? {} : { notice: done });
  });
  guarded.post('/account/two-factor', async (ctx) => {
    const b = ctx.state.body ?? {};
    await orPage(
      ctx,
      async () => {
        const codes = await service.enableTotp(who(ctx).user, ctx.state.sessionId ?? '', { password: b.password, secret: b.secret, code: b.code }, ctx.ip);
        send(ctx, recoveryCodesPage(who(ctx), codes, 'enabled'));
      },
      typeof b.secret === 'string' && TOTP_SECRET.test(b.secret) ? b.secret : undefined,
    );
  });
  guarded.post('/account/two-factor/recovery-codes', async (ctx) => {
    const b = ctx.state.body ?? {};
    await orPage(ctx, async () => send(ctx, recoveryCodesPage(who(ctx), await service.newRecoveryCodes(who(ctx).user, { password: b.password, code: b.code }, ctx.ip), 'replaced')));
  });
  guarded.post('/account/two-factor/off', async (ctx) => {
    const b = ctx.state.body ?? {};
    await orPage(ctx, async () => {
      await service.disableTotp(who(ctx).user, { password: b.password, code: b.code }, ctx.ip);
      ctx.status = 303;
      ctx.redirect('/account/two-factor?done=off');
    });
  });
}
