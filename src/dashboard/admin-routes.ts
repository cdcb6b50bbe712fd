// Admin routes (admin role only), pages and JSON API: accounts and balances, manual credit, refund
// tickets, key revocation on a holder's behalf, top-ups with their timelines, reconciliation.
import type Router from '@koa/router';
import type { Context } from 'koa';
import { CreditRefused, type AccountService, type CreditRefusal } from '../account-service/account-service.js';
import type { ReconciliationReport } from '../record/reconcile.js';
import { parseUsdCents, centsToMicros } from '../top-ups/quote.js';
import type { TopUpService } from '../top-ups/service.js';
import { adminAccountPage, adminHome, type AccountLine } from './admin-pages.js';
import type { DashboardState } from './state.js';
import { topUpPage } from './balance-pages.js';
import type { Html } from './html.js';
import { DashboardError } from './errors.js';
import { membersOf } from './memberships.js';
import type { RefundTickets } from './refund-tickets.js';
import { deploymentAdmin } from './route-guards.js';
import type { Session } from './sessions.js';
import type { TwoFactorSettings } from './two-factor-settings.js';
import type { Database } from '../record/database.js';
import { apiTicket } from './usage-routes.js';

type Ctx = Context & { state: DashboardState; params: Record<string, string> };

export interface AdminDeps {
  accounts: AccountService;
  tickets: RefundTickets;
  topUps: TopUpService | undefined;
  reconcile?: () => Promise<ReconciliationReport>;
  /** Admin pages need a session opened with TOTP (DASHBOARD_ADMIN_REQUIRE_TOTP). */
  requireTotp?: boolean;
  /** The record the members of an account are read from. */
  db: Database;
  /** Clearing a locked-out user's two-factor sign-in. */
  twoFactor: Pick<TwoFactorSettings, 'clearFor'>;
  send: (ctx: Context, page: Html, status?: number) => void;
}

/** A refused credit in the dashboard's words: status and message. */
const CREDIT_REFUSALS: Record<CreditRefusal, [number, string]> = {
  not_positive: [400, 'Enter an amount in US dollars, like 5 or 12.50.'],
  no_idempotency_key: [400, 'idempotency_key is required: a credit is applied once per key.'],
  too_large: [400, 'This credit would take the balance past the largest amount the ledger holds exactly.'],
  key_reused: [409, 'That idempotency key was used for another credit; nothing was credited.'],
};

/** What the admin pages and the admin API share: the role check, the named account, credit, revoke, decide. */
function adminHelpers(deps: AdminDeps) {
  const { accounts, tickets, send } = deps;
  // The role (and the second factor where required) is checked by each route's deploymentAdmin guard first.
  const admin = (ctx: Context): Session => (ctx as Ctx).state.session as Session;
  const accountLines = async (): Promise<AccountLine[]> =>
    Promise.all((await accounts.listAccounts()).map(async (account) => ({ account, ...(await accounts.balance(account.id)) })));
  const accountOf = async (id: string) => {
    const a = await accounts.getAccount(id);
    if (a === undefined) throw new DashboardError(404, 'There is no such account.');
    return a;
  };
  const credit = async (accountId: string, amount: unknown, key: unknown): Promise<number> => {
    const cents = parseUsdCents(amount);
    if (cents === undefined || cents <= 0) throw new DashboardError(400, 'Enter an amount in US dollars, like 5 or 12.50.');
    try {
      await accounts.credit(accountId, centsToMicros(cents), key);
    } catch (err) {
      if (err instanceof CreditRefused) throw new DashboardError(CREDIT_REFUSALS[err.reason][0], CREDIT_REFUSALS[err.reason][1]);
      throw err;
    }
    return cents;
  };
  /** The account the route names (admin role checked), for the page and the API alike. */
  const namedAccount = async (ctx: Context): Promise<string> => {
    admin(ctx);
    return (await accountOf((ctx as Ctx).params.accountId ?? '')).id;
  };
  /** Revokes a key for its holder (the account service tells the key cache). */
  const revokeFor = async (ctx: Context): Promise<string> => {
    const id = await namedAccount(ctx);
    if (!(await accounts.revokeKey(id, (ctx as Ctx).params.keyId ?? ''))) throw new DashboardError(404, 'There is no such key on this account.');
    return id;
  };
  /** Turns a user's two-factor sign-in off for them (admin role checked); false when it was off. */
  const clearTwoFactorFor = async (ctx: Context): Promise<{ accountId: string; cleared: boolean }> => {
    const accountId = await namedAccount(ctx);
    const cleared = await deps.twoFactor.clearFor({ adminUserId: admin(ctx).user.id }, accountId, (ctx as Ctx).params.userId ?? '');
    return { accountId, cleared };
  };
  const decide = async (ctx: Context, approve: boolean) => {
    const c = ctx as Ctx;
    const note = typeof c.state.body?.note === 'string' ? c.state.body.note.slice(0, 500) : undefined;
    return tickets.decide(c.params.ticketId ?? '', admin(c).user.email, approve, note);
  };
  const home = async (ctx: Context, extra: { flash?: string; error?: string; report?: ReconciliationReport } = {}, status = 200) =>
    send(ctx, adminHome(admin(ctx), { accounts: await accountLines(), tickets: await tickets.list(undefined, 'open'), ...extra }), status);
  const accountPage = async (ctx: Context, id: string, extra: { flash?: string; error?: string } = {}, status = 200) => {
    // The role first: a holder learns nothing of which account ids exist (403 for every id).
    const session = admin(ctx);
    const account = await accountOf(id);
    send(
      ctx,
      adminAccountPage(session, {
        account,
        ...(await accounts.balance(id)),
        keys: await accounts.listKeys(id),
        members: await membersOf(deps.db, id),
        topUps: (await deps.topUps?.list(id)) ?? [],
        labelOf: (t) => deps.topUps?.labelOf(t.provider) ?? t.provider,
        ...extra,
      }),
      status,
    );
  };

  return { admin, accountLines, accountOf, credit, namedAccount, revokeFor, clearTwoFactorFor, decide, home, accountPage };
}
type AdminHelpers = ReturnType<typeof adminHelpers>;

function adminPages(router: Router<DashboardState>, deps: AdminDeps, h: AdminHelpers): void {
  const onlyAdmins = deploymentAdmin(deps.requireTotp === true);
  const { tickets, send } = deps;
  const { admin, credit, namedAccount, revokeFor, clearTwoFactorFor, decide, home, accountPage } = h;
  // Flashes after a redirect name what was done, never an amount or text taken from the query.
  const DONE: Record<string, string> = {
    credited: 'Credit applied: the balance above includes it.',
    revoked: 'Key revoked: its next call gets 401.',
    'two-factor-cleared': 'Two-factor sign-in is off for that user: they were mailed, and every session of theirs ended.',
  };
  router.get('/admin', onlyAdmins, async (ctx) => {
    admin(ctx);
    const id = typeof ctx.query.decided === 'string' ? ctx.query.decided : undefined;
    const t = id === undefined ? undefined : await tickets.get(undefined, id).catch(() => undefined);
    const flash =
      t === undefined || t.status === 'open'
        ? undefined
        : t.status === 'approved'
          ? `Refunded $${((t.refunded ?? 0) / 1e6).toFixed(6)} for ${t.requestId}.`
          : `Declined the refund of ${t.requestId}.`;
    await home(ctx, flash === undefined ? {} : { flash });
  });
  router.post('/admin/reconciliation', onlyAdmins, async (ctx) => {
    admin(ctx);
    if (deps.reconcile === undefined) throw new DashboardError(404, 'Reconciliation needs the record.');
    await home(ctx, { report: await deps.reconcile() });
  });
  router.get('/admin/accounts/:accountId', onlyAdmins, (ctx) => {
    const done = typeof ctx.query.done === 'string' ? DONE[ctx.query.done] : undefined;
    return accountPage(ctx, (ctx as Ctx).params.accountId ?? '', done === undefined ? {} : { flash: done });
  });
  router.post('/admin/accounts/:accountId/credit', onlyAdmins, async (ctx) => {
    const c = ctx as Ctx;
    const id = await namedAccount(c);
    try {
      await credit(id, c.state.body?.amount_usd, c.state.body?.idempotency_key);
      // Post-redirect-get: a reload shows the page, it does not post the credit again.
      c.status = 303;
      c.redirect(`/admin/accounts/${encodeURIComponent(id)}?done=credited`);
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      await accountPage(c, id, { error: err.message }, err.status);
    }
  });
  router.post('/admin/accounts/:accountId/keys/:keyId/revoke', onlyAdmins, async (ctx) => {
    const id = await revokeFor(ctx);
    ctx.status = 303;
    ctx.redirect(`/admin/accounts/${encodeURIComponent(id)}?done=revoked`);
  });
  router.post('/admin/accounts/:accountId/users/:userId/clear-two-factor', onlyAdmins, async (ctx) => {
    const { accountId } = await clearTwoFactorFor(ctx);
    ctx.status = 303;
    ctx.redirect(`/admin/accounts/${encodeURIComponent(accountId)}?done=two-factor-cleared`);
  });
  router.post('/admin/refund-tickets/:ticketId/approve', onlyAdmins, async (ctx) => {
    const t = await decide(ctx, true);
    ctx.status = 303;
    ctx.redirect(`/admin?decided=${encodeURIComponent(t.id)}`);
  });
  router.post('/admin/refund-tickets/:ticketId/decline', onlyAdmins, async (ctx) => {
    const t = await decide(ctx, false);
    ctx.status = 303;
    ctx.redirect(`/admin?decided=${encodeURIComponent(t.id)}`);
  });
  router.get('/admin/top-ups/:topUpId', onlyAdmins, async (ctx) => {
    const c = ctx as Ctx;
    const session = admin(c);
    if (deps.topUps === undefined) throw new DashboardError(404, 'Top-ups are not set up.');
    const topUps = deps.topUps;
    send(c, topUpPage(session, await topUps.get(undefined, c.params.topUpId ?? ''), (t) => topUps.labelOf(t.provider), true));
  });
  router.post('/admin/top-ups/:topUpId/recheck', onlyAdmins, async (ctx) => {
    const c = ctx as Ctx;
    admin(c);
    if (deps.topUps === undefined) throw new DashboardError(404, 'Top-ups are not set up.');
    const t = await deps.topUps.recheck(undefined, c.params.topUpId ?? '');
    c.redirect(`/admin/top-ups/${t.id}`);
  });
}

function adminApi(router: Router<DashboardState>, deps: AdminDeps, h: AdminHelpers): void {
  const onlyAdmins = deploymentAdmin(deps.requireTotp === true);
  const { accounts, tickets } = deps;
  const { admin, accountLines, credit, namedAccount, revokeFor, clearTwoFactorFor, decide } = h;
  router.get('/api/admin/accounts', onlyAdmins, async (ctx) => {
    admin(ctx);
    ctx.body = { accounts: (await accountLines()).map((l) => ({ id: l.account.id, name: l.account.name, created_at: new Date(l.account.createdAt).toISOString(), balance_micro_usd: l.balance, held_micro_usd: l.held })) };
  });
  router.post('/api/admin/accounts/:accountId/credit', onlyAdmins, async (ctx) => {
    const c = ctx as Ctx;
    const id = await namedAccount(c);
    const cents = await credit(id, c.state.body?.amount_usd, c.state.body?.idempotency_key);
    c.body = { credited_micro_usd: centsToMicros(cents), balance_micro_usd: (await accounts.balance(id)).balance };
  });
  router.post('/api/admin/accounts/:accountId/keys/:keyId/revoke', onlyAdmins, async (ctx) => {
    await revokeFor(ctx);
    ctx.body = { revoked: true };
  });
  router.post('/api/admin/accounts/:accountId/users/:userId/clear-two-factor', onlyAdmins, async (ctx) => {
    ctx.body = { cleared: (await clearTwoFactorFor(ctx)).cleared };
  });
  router.get('/api/admin/refund-tickets', onlyAdmins, async (ctx) => {
    admin(ctx);
    ctx.body = { tickets: (await tickets.list(undefined)).map((t) => ({ ...apiTicket(t), account_id: t.accountId })) };
  });
  router.post('/api/admin/refund-tickets/:ticketId/approve', onlyAdmins, async (ctx) => {
    ctx.body = { ticket: apiTicket(await decide(ctx, true)) };
  });
  router.post('/api/admin/refund-tickets/:ticketId/decline', onlyAdmins, async (ctx) => {
    ctx.body = { ticket: apiTicket(await decide(ctx, false)) };
  });
  router.get('/api/admin/reconciliation', onlyAdmins, async (ctx) => {
    admin(ctx);
    if (deps.reconcile === undefined) throw new DashboardError(404, 'Reconciliation needs the record.');
    ctx.body = await deps.reconcile();
  });
}

export function adminRoutes(router: Router<DashboardState>, deps: AdminDeps): void {
  const h = adminHelpers(deps);
  adminPages(router, deps, h);
  adminApi(router, deps, h);
}
