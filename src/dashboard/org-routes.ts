// Organizations' pages and JSON API: Members (list, invite, change roles, remove, revoke invitations) and
// the organization's settings (rename, transfer ownership, delete, leave). Each route names the
// permission it needs (route-guards.ts); the services (organizations.ts, invitations.ts) check the
// finer rules (only an owner touches owners, the last owner stays).
import type Router from '@koa/router';
import type { Context } from 'koa';
import { DashboardError } from './errors.js';
import type { InvitationView } from './invitations.js';
import type { MemberLine } from './memberships.js';
import { membersPage, organizationPage } from './org-pages.js';
import type { OrganizationView } from './organizations.js';
import { allowed } from './actor.js';
import { isMemberRole, type MemberRole } from './roles.js';
import { need } from './route-guards.js';
import { budgetChangeFromInput } from './key-input.js';
import type { DashboardService } from './service.js';
import { acting, send, who, type Ctx, type DashboardState } from './state.js';

const apiMember = (m: MemberLine): Record<string, unknown> => ({ user_id: m.userId, email: m.email, role: m.role, joined_at: m.joinedAt.toISOString() });
const apiInvitation = (i: InvitationView): Record<string, unknown> => ({
  id: i.id,
  email: i.email,
  role: i.role,
  invited_by: i.invitedBy,
  created_at: i.createdAt.toISOString(),
  expires_at: i.expiresAt.toISOString(),
});
const apiOrganization = (o: OrganizationView): Record<string, unknown> => ({ account_id: o.accountId, name: o.name, created_at: o.createdAt.toISOString(), owners: o.owners });

/** Flashes after a redirect name what was done; never text taken from the query. */
const DONE: Record<string, string> = {
  created: 'Your organization is ready: you are its owner. Invite your team below; top up its balance on the Balance page.',
  joined: 'You joined the organization. Switch accounts from the menu at the top.',
  invited: 'Invitation sent: the link works once, for 7 days.',
  role: 'Role changed.',
  removed: 'Member removed: their keys here are revoked; their usage stays on record.',
  revoked: 'Invitation revoked: its link no longer works.',
  renamed: 'Organization renamed.',
  transferred: 'Ownership transferred: you are an admin now.',
  budgets: 'Budgets saved: they apply to the next request.',
};

const flash = (ctx: Context): string | undefined => {
  const key = Object.keys(DONE).find((k) => ctx.query[k] === '1');
  return key === undefined ? undefined : DONE[key];
};

export function organizationRoutes(guarded: Router<DashboardState>, service: DashboardService, linkBase: () => string): void {
  memberPages(guarded, service, linkBase);
  settingsPages(guarded, service);
  organizationApi(guarded, service, linkBase);
}

function memberPages(guarded: Router<DashboardState>, service: DashboardService, linkBase: () => string): void {
  const { organizations, invitations } = service;
  const render = async (ctx: Context, extra: { error?: string; invite?: { email: string; role: MemberRole } } = {}, status = 200): Promise<void> => {
    const actor = acting(ctx);
    const members = await organizations.members(actor);
    const pending = allowed(actor, 'members.manage') && actor.member.organization !== undefined ? await invitations.pending(actor) : undefined;
    const budgets = actor.member.organization === undefined ? [] : await service.teams.memberBudgets(actor);
    const done = flash(ctx);
    send(ctx, membersPage(who(ctx), { members, budgets, ...(pending === undefined ? {} : { invitations: pending }), ...(done === undefined ? {} : { notice: done }), ...extra }), status);
  };
  /** A refusal of the services re-renders the page with its message; a success redirects with its flash. */
  const act = async (ctx: Context, work: () => Promise<unknown>, done: keyof typeof DONE, invite?: { email: string; role: MemberRole }): Promise<void> => {
    try {
      await work();
      ctx.status = 303;
      ctx.redirect(`/members?${done}=1`);
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      await render(ctx, { error: err.message, ...(invite === undefined ? {} : { invite }) }, err.status);
    }
  };
  guarded.get('/members', need('members.view'), (ctx) => render(ctx));
  guarded.post('/members/invite', need('members.manage'), async (ctx) => {
    const b = ctx.state.body ?? {};
    const invite: { email: string; role: MemberRole } = { email: typeof b.email === 'string' ? b.email : '', role: isMemberRole(b.role) ? b.role : 'member' };
    await act(ctx, () => invitations.invite(acting(ctx), b.email, b.role, linkBase()), 'invited', invite);
  });
  guarded.post('/members/invitations/:id/revoke', need('members.manage'), (ctx) => act(ctx, () => invitations.revoke(acting(ctx), ctx.params.id ?? ''), 'revoked'));
  guarded.post('/members/:userId/role', need('members.manage'), (ctx) => act(ctx, () => organizations.changeRole(acting(ctx), ctx.params.userId ?? '', ctx.state.body?.role), 'role'));
  guarded.post('/members/:userId/remove', need('members.manage'), (ctx) => act(ctx, () => organizations.remove(acting(ctx), ctx.params.userId ?? ''), 'removed'));
  guarded.post('/members/:userId/budgets', need('budgets.manage'), (ctx) =>
    act(ctx, () => service.teams.setMemberBudgets(acting(ctx), ctx.params.userId ?? '', budgetChangeFromInput(ctx.state.body ?? {})), 'budgets'),
  );
}

function settingsPages(guarded: Router<DashboardState>, service: DashboardService): void {
  const { organizations } = service;
  const render = async (ctx: Context, error?: string, status = 200): Promise<void> => {
    const actor = acting(ctx);
    const [org, members, money] = await Promise.all([organizations.view(actor), organizations.members(actor), service.balance(actor)]);
    const done = flash(ctx);
    send(ctx, organizationPage(who(ctx), { org, members, ...money, ...(done === undefined ? {} : { notice: done }), ...(error === undefined ? {} : { error }) }), status);
  };
  const act = async (ctx: Context, work: () => Promise<unknown>, to: string): Promise<void> => {
    try {
      await work();
      ctx.status = 303;
      ctx.redirect(to);
    } catch (err) {
      if (!(err instanceof DashboardError) || err.status === 404) throw err;
      await render(ctx, err.message, err.status);
    }
  };
  guarded.get('/organization', need('members.view'), (ctx) => render(ctx));
  guarded.post('/organization/name', need('organization.manage'), (ctx) => act(ctx, () => organizations.rename(acting(ctx), ctx.state.body?.name), '/organization?renamed=1'));
  guarded.post('/organization/transfer', need('ownership.transfer'), (ctx) => act(ctx, () => organizations.transfer(acting(ctx), String(ctx.state.body?.user_id ?? '')), '/organization?transferred=1'));
  guarded.post('/organization/leave', need('members.view'), (ctx) => act(ctx, () => organizations.remove(acting(ctx), acting(ctx).user.id), '/?left=1'));
  guarded.post('/organization/delete', need('organization.delete'), (ctx) =>
    act(
      ctx,
      async () => {
        const name = acting(ctx).member.organization;
        // The page asks for the name typed out: a delete is not undone.
        if (name === undefined || ctx.state.body?.confirm !== name) throw new DashboardError(400, `Type the organization's name, ${name ?? ''}, to confirm.`);
        await organizations.delete(acting(ctx));
      },
      '/?deleted=1',
    ),
  );
}

function organizationApi(guarded: Router<DashboardState>, service: DashboardService, linkBase: () => string): void {
  const { organizations, invitations } = service;
  const userId = (ctx: Context): string => (ctx as Ctx).params.userId ?? '';
  guarded.get('/api/members', need('members.view'), async (ctx) => {
    ctx.body = { members: (await organizations.members(acting(ctx))).map(apiMember) };
  });
  guarded.patch('/api/members/:userId', need('members.manage'), async (ctx) => {
    ctx.body = { member: apiMember(await organizations.changeRole(acting(ctx), userId(ctx), ctx.state.body?.role)) };
  });
  guarded.delete('/api/members/:userId', need('members.manage'), async (ctx) => {
    const { keysRevoked } = await organizations.remove(acting(ctx), userId(ctx));
    ctx.body = { keys_revoked: keysRevoked };
  });
  guarded.get('/api/invitations', need('members.manage'), async (ctx) => {
    ctx.body = { invitations: (await invitations.pending(acting(ctx))).map(apiInvitation) };
  });
  guarded.post('/api/invitations', need('members.manage'), async (ctx) => {
    const b = ctx.state.body ?? {};
    ctx.status = 201;
    ctx.body = { invitation: apiInvitation(await invitations.invite(acting(ctx), b.email, b.role, linkBase())) };
  });
  guarded.delete('/api/invitations/:id', need('members.manage'), async (ctx) => {
    await invitations.revoke(acting(ctx), ctx.params.id ?? '');
    ctx.status = 204;
  });
  guarded.get('/api/organization', need('members.view'), async (ctx) => {
    ctx.body = { organization: apiOrganization(await organizations.view(acting(ctx))) };
  });
  guarded.patch('/api/organization', need('organization.manage'), async (ctx) => {
    ctx.body = { organization: apiOrganization(await organizations.rename(acting(ctx), ctx.state.body?.name)) };
  });
  guarded.post('/api/organization/transfer', need('ownership.transfer'), async (ctx) => {
    const to = ctx.state.body?.user_id;
    if (typeof to !== 'string' || to === '') throw new DashboardError(400, 'user_id is required: the member who becomes an owner.');
    ctx.body = { members: (await organizations.transfer(acting(ctx), to)).map(apiMember) };
  });
  guarded.post('/api/organization/leave', need('members.view'), async (ctx) => {
    const { keysRevoked } = await organizations.remove(acting(ctx), acting(ctx).user.id);
    ctx.body = { keys_revoked: keysRevoked };
  });
  guarded.delete('/api/organization', need('organization.delete'), async (ctx) => {
    const { keysRevoked } = await organizations.delete(acting(ctx));
    ctx.body = { keys_revoked: keysRevoked };
  });
}
