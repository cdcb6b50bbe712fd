// The SSO routes, open (no session yet): /sso/start sends the browser to the provider, /sso/callback
// takes it back and opens the session. Every refusal is a page in the dashboard's look with the
// reason, never a 500; without SSO configured neither route exists (404).
import type Router from '@koa/router';
import { DashboardError } from './errors.js';
import { homeOf } from './pages.js';
import type { DashboardService } from './service.js';
import { ssoRefusedPage } from './sso-pages.js';
import { SsoRefusal } from './sso-provider.js';
import { send, type DashboardState, type SessionCookie } from './state.js';

export function ssoRoutes(open: Router<DashboardState>, deps: { service: DashboardService; cookie: SessionCookie }): void {
  const { service, cookie } = deps;
  const sso = (): NonNullable<DashboardService['sso']> => {
    if (service.sso === undefined) throw new DashboardError(404, 'Single sign-on is not set up on this Tollgate; sign in with your e-mail and password.');
    return service.sso;
  };
  open.get('/sso/start', async (ctx) => {
    const signOn = sso();
    try {
      ctx.redirect((await signOn.start(ctx)).href);
    } catch (err) {
      if (!(err instanceof SsoRefusal)) throw err;
      send(ctx, ssoRefusedPage(signOn.button, err.message), err.status);
    }
  });
  open.get('/sso/callback', async (ctx) => {
    const signOn = sso();
    try {
      const { sessionId, session } = await signOn.finish(ctx, ctx.state.sessionId);
      cookie.set(ctx, sessionId, session.expiresAt);
      ctx.redirect(homeOf(session));
    } catch (err) {
      if (!(err instanceof SsoRefusal)) throw err;
      send(ctx, ssoRefusedPage(signOn.button, err.message), err.status);
    }
  });
}
