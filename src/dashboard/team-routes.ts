// Teams' page and JSON API (GET|POST /api/teams, GET|PATCH|DELETE /api/teams/{id}, PUT|DELETE
// /api/teams/{id}/members/{userId}) and members' budgets (GET /api/budgets, PATCH
// /api/members/{userId}/budgets). Each route names the permission it needs (route-guards.ts); the
// service (teams.ts) checks the finer rules (a member sees only their teams and their own budgets).
import type Router from '@koa/router';
import type { Context } from 'koa';
import type { TeamChange } from '../accounts/teams.js';
import { DashboardError } from './errors.js';
import { budgetChangeFromInput, budgetsFromInput } from './key-input.js';
import { membersOf } from './memberships.js';
import { need } from './route-guards.js';
import type { DashboardService } from './service.js';
import { acting, send, who, type Ctx, type DashboardState } from './state.js';
import { teamsPage } from './team-pages.js';
import type { MemberBudgetView, TeamView } from './teams.js';

const spendBody = (s: TeamView['spend']): Record<string, number> => ({ month_spent_micro_usd: s.monthSpent, lifetime_spent_micro_usd: s.lifetimeSpent, held_micro_usd: s.lifetimeHeld });

export const apiTeam = (t: TeamView): Record<string, unknown> => ({
  id: t.id,
  name: t.name,
  created_at: new Date(t.createdAt).toISOString(),
  monthly_budget_micro_usd: t.monthlyBudget ?? null,
  lifetime_budget_micro_usd: t.lifetimeBudget ?? null,
  ...spendBody(t.spend),
  members: t.members.map((m) => ({ user_id: m.userId, email: m.email })),
  keys: t.keys,
});

export const apiMemberBudgets = (b: MemberBudgetView): Record<string, unknown> => ({
  user_id: b.userId,
  email: b.email,
  role: b.role,
  monthly_budget_micro_usd: b.monthlyBudget ?? null,
  lifetime_budget_micro_usd: b.lifetimeBudget ?? null,
  ...spendBody(b.spend),
});

/** A team's change from a form or JSON body: what it names changes (a budget's "" or null clears it). */
function teamChangeFromInput(body: Record<string, unknown>): TeamChange {
  const change: TeamChange = { ...budgetChangeFromInput(body) };
  if (Object.hasOwn(body, 'name')) {
    if (typeof body.name !== 'string') throw new DashboardError(400, "name must be the team's name, 1 to 60 characters.");
    change.name = body.name;
  }
  return change;
}

const DONE: Record<string, string> = {
  created: 'Team created. Add its members, then put keys in it from the Keys page.',
  saved: 'Team saved: its budgets apply to the next request.',
  deleted: 'Team deleted: its keys left it.',
  members: 'Team members changed.',
};

const param = (ctx: Context, name: string): string => (ctx as Ctx).params[name] ?? '';

export function teamRoutes(guarded: Router<DashboardState>, service: DashboardService): void {
  const { teams } = service;
  const render = async (ctx: Context, extra: { error?: string; draft?: { name: string } } = {}, status = 200): Promise<void> => {
    const actor = acting(ctx);
    const [list, members] = await Promise.all([teams.list(actor), membersOf(service.db, actor.member.accountId)]);
    const done = Object.keys(DONE).find((k) => ctx.query[k] === '1');
    send(ctx, teamsPage(who(ctx), { teams: list, members, available: teams.available, ...(done === undefined ? {} : { notice: DONE[done] }), ...extra }), status);
  };
  /** A refusal re-renders the page with its message; a success redirects with its flash. */
  const act = async (ctx: Context, work: () => Promise<unknown>, done: keyof typeof DONE, draft?: { name: string }): Promise<void> => {
    try {
      await work();
      ctx.status = 303;
      ctx.redirect(`/teams?${done}=1`);
    } catch (err) {
      if (!(err instanceof DashboardError)) throw err;
      await render(ctx, { error: err.message, ...(draft === undefined ? {} : { draft }) }, err.status);
    }
  };
  guarded.get('/teams', need('teams.view'), (ctx) => render(ctx));
  guarded.post('/teams', need('teams.manage'), async (ctx) => {
    const b = ctx.state.body ?? {};
    await act(ctx, () => teams.create(acting(ctx), b.name, budgetsFromInput(b)), 'created', { name: typeof b.name === 'string' ? b.name : '' });
  });
  guarded.post('/teams/:teamId', need('teams.manage'), (ctx) => act(ctx, () => teams.update(acting(ctx), param(ctx, 'teamId'), teamChangeFromInput(ctx.state.body ?? {})), 'saved'));
  guarded.post('/teams/:teamId/delete', need('teams.manage'), (ctx) => act(ctx, () => teams.delete(acting(ctx), param(ctx, 'teamId')), 'deleted'));
  guarded.post('/teams/:teamId/members', need('teams.manage'), (ctx) =>
    act(ctx, () => teams.setMember(acting(ctx), param(ctx, 'teamId'), String(ctx.state.body?.user_id ?? ''), true), 'members'),
  );
  guarded.post('/teams/:teamId/members/:userId/remove', need('teams.manage'), (ctx) =>
    act(ctx, () => teams.setMember(acting(ctx), param(ctx, 'teamId'), param(ctx, 'userId'), false), 'members'),
  );

  guarded.get('/api/teams', need('teams.view'), async (ctx) => {
    ctx.body = { teams: (await teams.list(acting(ctx))).map(apiTeam) };
  });
  guarded.post('/api/teams', need('teams.manage'), async (ctx) => {
    const b = ctx.state.body ?? {};
    ctx.status = 201;
    ctx.body = { team: apiTeam(await teams.create(acting(ctx), b.name, budgetsFromInput(b))) };
  });
  guarded.get('/api/teams/:teamId', need('teams.view'), async (ctx) => {
    ctx.body = { team: apiTeam(await teams.get(acting(ctx), param(ctx, 'teamId'))) };
  });
  guarded.patch('/api/teams/:teamId', need('teams.manage'), async (ctx) => {
    ctx.body = { team: apiTeam(await teams.update(acting(ctx), param(ctx, 'teamId'), teamChangeFromInput(ctx.state.body ?? {}))) };
  });
  guarded.delete('/api/teams/:teamId', need('teams.manage'), async (ctx) => {
    await teams.delete(acting(ctx), param(ctx, 'teamId'));
    ctx.status = 204;
  });
  guarded.put('/api/teams/:teamId/members/:userId', need('teams.manage'), async (ctx) => {
    ctx.body = { team: apiTeam(await teams.setMember(acting(ctx), param(ctx, 'teamId'), param(ctx, 'userId'), true)) };
  });
  guarded.delete('/api/teams/:teamId/members/:userId', need('teams.manage'), async (ctx) => {
    ctx.body = { team: apiTeam(await teams.setMember(acting(ctx), param(ctx, 'teamId'), param(ctx, 'userId'), false)) };
  });
  guarded.get('/api/budgets', need('teams.view'), async (ctx) => {
    ctx.body = { members: (await teams.memberBudgets(acting(ctx))).map(apiMemberBudgets) };
  });
  guarded.patch('/api/members/:userId/budgets', need('budgets.manage'), async (ctx) => {
    ctx.body = { member: apiMemberBudgets(await teams.setMemberBudgets(acting(ctx), param(ctx, 'userId'), budgetChangeFromInput(ctx.state.body ?? {}))) };
  });
}
