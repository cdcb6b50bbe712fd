// API keys: the Keys pages (create with a one-time reveal, caps, the cost ceiling per request, rate
// limits and the account's default ones, the key's team, revoke) and /api/keys. A member manages the keys they made;
// owners and admins every key (keys.ts).
import type Router from '@koa/router';
import type { Context } from 'koa';
import { openReveal, sealReveal, REVEAL_COOKIE } from './key-reveal.js';
import { editCapsPage, keysPage, revokePage } from './pages.js';
import { DashboardError } from './errors.js';
import { capsFromInput, keyChangeFromInput, maxCostFromInput, rateLimitsFromInput } from './key-input.js';
import type { KeyView } from './keys.js';
import { need } from './route-guards.js';
import type { DashboardService } from './service.js';
import type { RateLimits } from '../accounts/rate-limits.js';
import { acting, send, who, type Ctx, type DashboardState } from './state.js';

const keyId = (ctx: Context): string => (ctx as Ctx).params.keyId ?? '';

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
    max_cost_per_request_micro_usd: k.maxCostPerRequest ?? null,
    lifetime_spent_micro_usd: k.lifetimeSpent,
    month_spent_micro_usd: k.monthSpent,
    held_micro_usd: k.held,
    last_used_at: k.lastUsedAt === undefined ? null : new Date(k.lastUsedAt).toISOString(),
    rate_limits: rateLimitsBody(k.rateLimits),
    owner: k.owner === undefined ? null : { user_id: k.owner.id, email: k.owner.email },
    team: k.team === undefined ? null : { id: k.team.id, name: k.team.name },
  };
}

/** The team a form or JSON body names: `team_id` (a team's id; "" or null for none), or undefined when it names none. */
function teamFromInput(body: Record<string, unknown>): string | null | undefined {
  if (!Object.hasOwn(body, 'team_id')) return undefined;
  const v = body.team_id;
  if (v === null || v === '') return null;
  if (typeof v !== 'string') throw new DashboardError(400, "team_id must be a team's id, or null for none.");
  return v;
}

/** Rate limits as the JSON API answers them: every field, null where none is set. */
function rateLimitsBody(l: RateLimits | undefined): Record<string, number | null> {
  return {
    requests_per_minute: l?.requestsPerMinute ?? null,
    tokens_per_minute: l?.tokensPerMinute ?? null,
    concurrent_requests: l?.concurrentRequests ?? null,
  };
}

export function keyPages(guarded: Router<DashboardState>, service: DashboardService, secureCookie: boolean): void {
  const { keys } = service;
  const clearReveal = (ctx: Context): void => {
    if (secureCookie) ctx.cookies.secure = true;
    ctx.cookies.set(REVEAL_COOKIE, '', { httpOnly: true, sameSite: 'strict', secure: secureCookie, expires: new Date(0), path: '/keys', overwrite: true });
  };
  guarded.get('/keys', need('keys.own'), async (ctx) => {
    const s = who(ctx);
    const actor = acting(ctx);
    // A key just made (post-redirect-get): its secret is shown by this one response, then the sealed
    // copy is gone, so a reload shows the list and makes nothing.
    const sealed = ctx.cookies.get(REVEAL_COOKIE);
    const reveal = sealed === undefined || sealed === '' ? undefined : await openReveal(service.db, sealed, ctx.state.sessionId ?? '');
    if (sealed !== undefined && sealed !== '') clearReveal(ctx);
    const notice = ctx.query.sent === 'confirmation' ? 'A new confirmation link is on its way.' : undefined;
    const accountLimits = await keys.accountRateLimits(actor);
    send(ctx, keysPage(s, await keys.listKeys(actor), { accountLimits, teams: await service.teams.list(actor), ...(reveal === undefined ? {} : { reveal }), ...(notice === undefined ? {} : { notice }) }));
  });
  // Registered before /keys/:keyId/..., though no route of a key has this shape.
  guarded.post('/keys/rate-limits', need('keys.defaults'), async (ctx) => {
    const s = who(ctx);
    const actor = acting(ctx);
    try {
      await keys.setAccountRateLimits(actor, rateLimitsFromInput(ctx.state.body ?? {}));
      ctx.redirect('/keys');
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      send(ctx, keysPage(s, await keys.listKeys(actor), { error: err.message, accountLimits: await keys.accountRateLimits(actor) }), err.status);
    }
  });
  guarded.post('/keys', need('keys.own'), async (ctx) => {
    const s = who(ctx);
    const actor = acting(ctx);
    const b = ctx.state.body ?? {};
    try {
      const { key, secret } = await keys.createKey(actor, b.name, { ...capsFromInput(b), ...maxCostFromInput(b) }, rateLimitsFromInput(b), teamFromInput(b) ?? undefined);
      // Sealed in the record under a key only this browser gets (never the secret in a redirect target,
      // a log or a cache), and shown by the GET the redirect leads to.
      const cookie = await sealReveal(service.db, ctx.state.sessionId ?? '', { name: key.name, secret });
      if (secureCookie) ctx.cookies.secure = true;
      ctx.cookies.set(REVEAL_COOKIE, cookie, { httpOnly: true, sameSite: 'strict', secure: secureCookie, maxAge: 5 * 60_000, path: '/keys', overwrite: true });
      ctx.status = 303;
      ctx.redirect('/keys');
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      send(ctx, keysPage(s, await keys.listKeys(actor), { error: err.message, accountLimits: await keys.accountRateLimits(actor), teams: await service.teams.list(actor) }), err.status);
    }
  });
  guarded.get('/keys/:keyId/edit', need('keys.own'), async (ctx) => send(ctx, editCapsPage(who(ctx), await keys.getKey(acting(ctx), keyId(ctx)), undefined, await service.teams.list(acting(ctx)))));
  // The key's team: owners and admins any team, a member one they are in (keys.ts checks).
  guarded.post('/keys/:keyId/team', need('keys.own'), async (ctx) => {
    const s = who(ctx);
    const key = await keys.getKey(acting(ctx), keyId(ctx));
    try {
      await keys.setTeam(acting(ctx), key.id, teamFromInput(ctx.state.body ?? {}) ?? null);
      ctx.status = 303;
      ctx.redirect('/keys');
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      send(ctx, editCapsPage(s, key, err.message, await service.teams.list(acting(ctx))), err.status);
    }
  });
  // Each form posts its own fields (the caps, the cost ceiling, or the rate limits), and only those change.
  for (const form of ['caps', 'max-cost', 'rate-limits']) {
    guarded.post(`/keys/:keyId/${form}`, need('keys.own'), async (ctx) => {
      const s = who(ctx);
      const key = await keys.getKey(acting(ctx), keyId(ctx));
      try {
        await keys.updateKey(acting(ctx), key.id, keyChangeFromInput(ctx.state.body ?? {}));
        ctx.redirect('/keys');
      } catch (err) {
        if (!(err instanceof DashboardError)) throw err;
        send(ctx, editCapsPage(s, key, err.message), err.status);
      }
    });
  }
  guarded.get('/keys/:keyId/revoke', need('keys.own'), async (ctx) => send(ctx, revokePage(who(ctx), await keys.getKey(acting(ctx), keyId(ctx)))));
  guarded.post('/keys/:keyId/revoke', need('keys.own'), async (ctx) => {
    await keys.revokeKey(acting(ctx), keyId(ctx));
    ctx.redirect('/keys');
  });
}

export function keyApi(guarded: Router<DashboardState>, service: DashboardService): void {
  const { keys } = service;
  guarded.get('/api/keys', need('keys.own'), async (ctx) => {
    ctx.body = { keys: (await keys.listKeys(acting(ctx))).map(apiKey) };
  });
  guarded.post('/api/keys', need('keys.own'), async (ctx) => {
    const b = ctx.state.body ?? {};
    const { key, secret } = await keys.createKey(acting(ctx), b.name, { ...capsFromInput(b), ...maxCostFromInput(b) }, rateLimitsFromInput(b), teamFromInput(b) ?? undefined);
    ctx.status = 201;
    ctx.body = { key: apiKey(key), secret };
  });
  guarded.get('/api/keys/:keyId', need('keys.own'), async (ctx) => {
    ctx.body = { key: apiKey(await keys.getKey(acting(ctx), keyId(ctx))) };
  });
  // Partial: a cap, the cost ceiling or a limit the body does not name is kept; null clears it.
  guarded.patch('/api/keys/:keyId', need('keys.own'), async (ctx) => {
    const body = ctx.state.body ?? {};
    const team = teamFromInput(body);
    // The change is checked whole before anything is written: a bad cap leaves the team as it was.
    const change = keyChangeFromInput(body);
    if (team !== undefined) await keys.setTeam(acting(ctx), keyId(ctx), team);
    ctx.body = { key: apiKey(await keys.updateKey(acting(ctx), keyId(ctx), change)) };
  });
  guarded.post('/api/keys/:keyId/revoke', need('keys.own'), async (ctx) => {
    ctx.body = { key: apiKey(await keys.revokeKey(acting(ctx), keyId(ctx))) };
  });
}
