// Every guarded route names what it needs, as the first middleware of its route: a permission of the
// acting member's role (roles.ts, the one table), only a signed-in user (the user's own settings), or
// the deployment's admin. The middleware checks it before the handler runs and marks itself, so a
// test can walk the route table and find a route that checks nothing.
import type Koa from 'koa';
import { actorOf, requirePermission } from './actor.js';
import { DashboardError } from './errors.js';
import type { Permission } from './roles.js';
import { who, type DashboardState } from './state.js';

type Middleware = Koa.Middleware<DashboardState>;

export type RouteGuard = { kind: 'permission'; permission: Permission } | { kind: 'signed-in' } | { kind: 'deployment-admin' };

const GUARDS = new WeakMap<Middleware, RouteGuard>();

function marked(guard: RouteGuard, mw: Middleware): Middleware {
  GUARDS.set(mw, guard);
  return mw;
}

/** The guard a middleware is, if it is one. */
export const guardOf = (mw: unknown): RouteGuard | undefined => (typeof mw === 'function' ? GUARDS.get(mw as Middleware) : undefined);

/** The acting member's role must have `permission` in the session's account (403 otherwise). */
export function need(permission: Permission): Middleware {
  return marked({ kind: 'permission', permission }, async (ctx, next) => {
    const actor = actorOf(who(ctx));
    requirePermission(actor, permission);
    ctx.state.actor = actor;
    await next();
  });
}

/** The user's own business (sign-out, two-factor, switching accounts, creating an organization): any signed-in user. */
export const signedIn: Middleware = marked({ kind: 'signed-in' }, async (_ctx, next) => {
  await next();
});

/** The deployment's admin (the admin role), with a session opened by TOTP where the deployment requires it. */
export function deploymentAdmin(requireTotp: boolean): Middleware {
  return marked({ kind: 'deployment-admin' }, async (ctx, next) => {
    const s = who(ctx);
    if (s.user.role !== 'admin') throw new DashboardError(403, 'This needs the admin role.');
    if (requireTotp && !s.secondFactor) {
      throw new DashboardError(
        403,
        s.user.totpEnabled
          ? 'The admin pages need a session opened with your authenticator code: sign out and sign in again with it.'
          : 'The admin pages need two-factor sign-in on this Tollgate: turn it on at /account/two-factor.',
      );
    }
    await next();
  });
}
