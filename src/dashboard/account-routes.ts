// The signed-in user's own business, whatever account they act on: signing out (here or everywhere),
// the session as the API sees it, the address confirmation sent again, two-factor sign-in with its
// recovery codes, switching between the accounts they belong to, creating an organization, and
// accepting an invitation.
import type Router from '@koa/router';
import type { Context } from 'koa';
import { DashboardError } from './errors.js';
import { newOrganizationPage } from './org-pages.js';
import { signedIn } from './route-guards.js';
import { recoveryCodesPage, twoFactorPage, type TwoFactorState } from './security-pages.js';
import type { DashboardService } from './service.js';
import { apiMembership, apiSession, send, who, type DashboardState, type SessionCookie } from './state.js';
import { TOTP_SECRET } from './totp.js';

export function accountRoutes(guarded: Router<DashboardState>, deps: { service: DashboardService; cookie: SessionCookie; linkBase: () => string }): void {
  const { service, cookie, linkBase } = deps;
  const { identity } = service;
  guarded.post('/sign-out', signedIn, async (ctx) => {
    await identity.signOut(ctx.state.sessionId ?? '', who(ctx).user);
    cookie.clear(ctx);
    ctx.redirect('/sign-in');
  });
  guarded.post('/sign-out-everywhere', signedIn, async (ctx) => {
    await identity.signOutEverywhere(who(ctx).user);
    cookie.clear(ctx);
    ctx.redirect('/sign-in');
  });
  guarded.get('/api/session', signedIn, (ctx) => {
    ctx.body = { ...apiSession(who(ctx)), expires_at: who(ctx).expiresAt.toISOString() };
  });
  guarded.post('/api/sign-out', signedIn, async (ctx) => {
    await identity.signOut(ctx.state.sessionId ?? '', who(ctx).user);
    cookie.clear(ctx);
    ctx.status = 204;
  });
  guarded.post('/api/sign-out-everywhere', signedIn, async (ctx) => {
    const ended = await identity.signOutEverywhere(who(ctx).user);
    cookie.clear(ctx);
    ctx.body = { sessions_ended: ended };
  });
  // Address confirmation, sent again on request.
  guarded.post('/resend-verification', signedIn, async (ctx) => {
    await identity.resendConfirmation(who(ctx).user, linkBase(), ctx.ip);
    ctx.status = 303;
    ctx.redirect('/keys?sent=confirmation');
  });
  guarded.post('/api/resend-verification', signedIn, async (ctx) => {
    await identity.resendConfirmation(who(ctx).user, linkBase(), ctx.ip);
    ctx.status = 202;
    ctx.body = { message: who(ctx).user.emailVerified ? 'This address is confirmed already.' : 'A new confirmation link was mailed.' };
  });
  accountSwitchRoutes(guarded, service);
  twoFactorRoutes(guarded, service);
}

/** The account switcher, a new organization, and an invitation accepted by a user already signed in. */
function accountSwitchRoutes(guarded: Router<DashboardState>, service: DashboardService): void {
  const { sessions } = service;
  /** Makes the session act on one of the user's accounts (404 for any other, as for one that does not exist). */
  const choose = async (ctx: Context, accountId: unknown): Promise<void> => {
    const s = who(ctx);
    const m = s.memberships.find((x) => x.accountId === accountId);
    if (m === undefined) throw new DashboardError(404, 'You are not a member of that account.');
    await sessions.choose((ctx as Context & { state: DashboardState }).state.sessionId ?? '', m.accountId);
  };
  guarded.post('/account/switch', signedIn, async (ctx) => {
    await choose(ctx, ctx.state.body?.account_id);
    ctx.status = 303;
    // The start page of the role in the account chosen (a billing member has no Keys page).
    ctx.redirect('/');
  });
  guarded.get('/api/accounts', signedIn, (ctx) => {
    ctx.body = { accounts: who(ctx).memberships.map(apiMembership) };
  });
  guarded.post('/api/session/account', signedIn, async (ctx) => {
    await choose(ctx, ctx.state.body?.account_id);
    const s = (await sessions.load(ctx.state.sessionId ?? '')) ?? who(ctx);
    ctx.body = { ...apiSession(s), expires_at: s.expiresAt.toISOString() };
  });
  guarded.get('/organizations/new', signedIn, (ctx) => send(ctx, newOrganizationPage(who(ctx))));
  guarded.post('/organizations', signedIn, async (ctx) => {
    try {
      const org = await service.organizations.create(who(ctx).user, ctx.state.body?.name);
      await sessions.choose(ctx.state.sessionId ?? '', org.accountId);
      ctx.status = 303;
      ctx.redirect('/members?created=1');
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      send(ctx, newOrganizationPage(who(ctx), err.message, typeof ctx.state.body?.name === 'string' ? ctx.state.body.name : ''), err.status);
    }
  });
  guarded.post('/api/organizations', signedIn, async (ctx) => {
    const org = await service.organizations.create(who(ctx).user, ctx.state.body?.name);
    // The new organization is the session's account from now on, as on the page.
    await sessions.choose(ctx.state.sessionId ?? '', org.accountId);
    ctx.status = 201;
    ctx.body = { account: apiMembership(org) };
  });
  guarded.post('/invitations/:token/accept', signedIn, async (ctx) => {
    const joined = await service.invitations.accept(ctx.params.token ?? '', who(ctx).user);
    await sessions.choose(ctx.state.sessionId ?? '', joined.accountId);
    ctx.status = 303;
    ctx.redirect('/members?joined=1');
  });
  guarded.post('/api/invitations/accept', signedIn, async (ctx) => {
    const token = ctx.state.body?.token;
    if (typeof token !== 'string' || token === '') throw new DashboardError(400, 'token is required: the last part of the invitation link.');
    const joined = await service.invitations.accept(token, who(ctx).user);
    await sessions.choose(ctx.state.sessionId ?? '', joined.accountId);
    ctx.body = { account: apiMembership(joined) };
  });
}

/** The Security page: two-factor sign-in on (password and a code), recovery codes, off (password and a code or recovery code). */
function twoFactorRoutes(guarded: Router<DashboardState>, service: DashboardService): void {
  const { twoFactor } = service;
  const DONE: Record<string, string> = { off: 'Two-factor sign-in is off: signing in asks for your password only.' };
  const page = async (ctx: Context, opts: { error?: string; notice?: string; secret?: string } = {}, status = 200): Promise<void> => {
    const s = who(ctx);
    // After a refused enrolment, the secret the holder already added to the app is kept.
    const state: TwoFactorState = s.user.totpEnabled
      ? { on: true, codesLeft: await twoFactor.recoveryCodesLeft(s.user) }
      : { on: false, enrolment: opts.secret === undefined ? twoFactor.enrolment(s.user) : { secret: opts.secret, uri: '' } };
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
  guarded.get('/account/two-factor', signedIn, async (ctx) => {
    const done = typeof ctx.query.done === 'string' ? DONE[ctx.query.done] : undefined;
    await page(ctx, done === undefined ? {} : { notice: done });
  });
  guarded.post('/account/two-factor', signedIn, async (ctx) => {
    const b = ctx.state.body ?? {};
    await orPage(
      ctx,
      async () => {
        const codes = await twoFactor.enable(who(ctx).user, ctx.state.sessionId ?? '', { password: b.password, secret: b.secret, code: b.code }, ctx.ip);
        send(ctx, recoveryCodesPage(who(ctx), codes, 'enabled'));
      },
      typeof b.secret === 'string' && TOTP_SECRET.test(b.secret) ? b.secret : undefined,
    );
  });
  guarded.post('/account/two-factor/recovery-codes', signedIn, async (ctx) => {
    const b = ctx.state.body ?? {};
    await orPage(ctx, async () => send(ctx, recoveryCodesPage(who(ctx), await twoFactor.newRecoveryCodes(who(ctx).user, { password: b.password, code: b.code }, ctx.ip), 'replaced')));
  });
  guarded.post('/account/two-factor/off', signedIn, async (ctx) => {
    const b = ctx.state.body ?? {};
    await orPage(ctx, async () => {
      await twoFactor.disable(who(ctx).user, { password: b.password, code: b.code }, ctx.ip);
      ctx.status = 303;
      ctx.redirect('/account/two-factor?done=off');
    });
  });
}
