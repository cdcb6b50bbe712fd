// Teams and budgets as the dashboard offers them to the member acting on an account: owners and admins
// create teams, set their budgets and members, and set members' budgets; everyone sees the teams they are
// in and their own budgets (owners, admins and billing see every team and every member's). Spend is the
// hot path's (what the budgets are weighed against now). The rules of the data (names, budgets, members
// of the account) are the account service's (accounts/teams.ts).
import type { KeySpend } from '../billing/ledger.js';
import type { AccountService } from '../account-service/account-service.js';
import { TeamChangeRefused, type BudgetChange, type Team, type TeamChange, type TeamStore } from '../accounts/teams.js';
import type { ScopeBudgets } from '../accounts/account-store.js';
import type { Database } from '../record/database.js';
import { allowed, requirePermission, type Actor } from './actor.js';
import { DashboardError } from './errors.js';
import { membersOf } from './memberships.js';
import type { MemberRole } from './roles.js';

export interface TeamView extends ScopeBudgets {
  id: string;
  name: string;
  createdAt: number;
  members: Array<{ userId: string; email: string }>;
  /** The account's keys in the team (live and revoked). */
  keys: number;
  spend: KeySpend;
}

export interface MemberBudgetView extends ScopeBudgets {
  userId: string;
  email: string;
  role: MemberRole;
  spend: KeySpend;
}

const REFUSAL_STATUS: Record<TeamChangeRefused['reason'], number> = {
  name_invalid: 400,
  budget_invalid: 400,
  name_taken: 409,
  no_team: 404,
  no_key: 404,
  not_a_member: 404,
};

/** The account service's refusal as the dashboard's (a status and the same words). */
export async function dashboardRefusal<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof TeamChangeRefused) throw new DashboardError(REFUSAL_STATUS[err.reason], err.message);
    throw err;
  }
}

export class TeamsService {
  constructor(private readonly opts: { db: Database; accounts: AccountService }) {}

  /** Whether this dashboard keeps teams (they live in the record). */
  get available(): boolean {
    return this.opts.accounts.teams !== undefined;
  }

  private store(): TeamStore {
    const teams = this.opts.accounts.teams;
    if (teams === undefined) throw new DashboardError(404, 'Teams and budgets are kept in the record (DATABASE_URL): this Tollgate runs without one.');
    return teams;
  }

  /** The teams the actor sees: every team with teams.all, else the ones they are in. */
  async list(actor: Actor): Promise<TeamView[]> {
    if (!this.available) return [];
    const accountId = actor.member.accountId;
    const [teams, members, keys] = await Promise.all([this.store().listTeams(accountId), membersOf(this.opts.db, accountId), this.opts.accounts.listKeys(accountId)]);
    const emails = new Map(members.map((m) => [m.userId, m.email]));
    const seen = allowed(actor, 'teams.all') ? teams : teams.filter((t) => t.memberIds.includes(actor.user.id));
    return Promise.all(seen.map(async (t) => this.view(t, emails, keys.filter((k) => k.teamId === t.id).length)));
  }

  private async view(t: Team, emails: Map<string, string>, keys: number): Promise<TeamView> {
    return {
      id: t.id,
      name: t.name,
      createdAt: t.createdAt,
      ...(t.lifetimeBudget === undefined ? {} : { lifetimeBudget: t.lifetimeBudget }),
      ...(t.monthlyBudget === undefined ? {} : { monthlyBudget: t.monthlyBudget }),
      members: t.memberIds.map((userId) => ({ userId, email: emails.get(userId) ?? userId })),
      keys,
      spend: await this.opts.accounts.scopeSpend(t.accountId, 'team', t.id),
    };
  }

  /** A team the actor may see; another one answers as one that does not exist. */
  async get(actor: Actor, teamId: string): Promise<TeamView> {
    const found = (await this.list(actor)).find((t) => t.id === teamId);
    if (found === undefined) throw new DashboardError(404, 'No such team in this account.');
    return found;
  }

  async create(actor: Actor, name: unknown, budgets: ScopeBudgets): Promise<TeamView> {
    requirePermission(actor, 'teams.manage');
    const team = await dashboardRefusal(() => this.store().createTeam(actor.member.accountId, typeof name === 'string' ? name : '', budgets));
    return this.get(actor, team.id);
  }

  async update(actor: Actor, teamId: string, change: TeamChange): Promise<TeamView> {
    requirePermission(actor, 'teams.manage');
    const team = await dashboardRefusal(() => this.store().updateTeam(actor.member.accountId, teamId, change));
    if (team === undefined) throw new DashboardError(404, 'No such team in this account.');
    return this.get(actor, teamId);
  }

  async delete(actor: Actor, teamId: string): Promise<void> {
    requirePermission(actor, 'teams.manage');
    if (!(await this.store().deleteTeam(actor.member.accountId, teamId))) throw new DashboardError(404, 'No such team in this account.');
  }

  async setMember(actor: Actor, teamId: string, userId: string, inTeam: boolean): Promise<TeamView> {
    requirePermission(actor, 'teams.manage');
    await dashboardRefusal(() => this.store().setTeamMember(actor.member.accountId, teamId, userId, inTeam));
    return this.get(actor, teamId);
  }

  /** Members' budgets and spend: every member's with teams.all, else the actor's own. */
  async memberBudgets(actor: Actor): Promise<MemberBudgetView[]> {
    if (!this.available) return [];
    const accountId = actor.member.accountId;
    const all = allowed(actor, 'teams.all');
    const members = (await membersOf(this.opts.db, accountId)).filter((m) => all || m.userId === actor.user.id);
    const set = new Map((await this.store().listMemberBudgets(accountId)).map((b) => [b.userId, b]));
    return Promise.all(
      members.map(async (m) => {
        const b = set.get(m.userId);
        return {
          userId: m.userId,
          email: m.email,
          role: m.role,
          ...(b?.lifetimeBudget === undefined ? {} : { lifetimeBudget: b.lifetimeBudget }),
          ...(b?.monthlyBudget === undefined ? {} : { monthlyBudget: b.monthlyBudget }),
          spend: await this.opts.accounts.scopeSpend(accountId, 'member', m.userId),
        };
      }),
    );
  }

  async setMemberBudgets(actor: Actor, userId: string, change: BudgetChange): Promise<MemberBudgetView> {
    requirePermission(actor, 'budgets.manage');
    await dashboardRefusal(() => this.store().setMemberBudgets(actor.member.accountId, userId, change));
    const found = (await this.memberBudgets(actor)).find((m) => m.userId === userId);
    if (found === undefined) throw new DashboardError(404, 'No such member in this account.');
    return found;
  }

  /**
   * Whether the actor may put a key owned by `ownerId` in `teamId` (null: out of any team): owners and
   * admins any key in any team; a member their own key, in a team they are in.
   */
  async checkKeyTeam(actor: Actor, ownerId: string | undefined, teamId: string | null): Promise<void> {
    if (allowed(actor, 'teams.manage')) {
      if (teamId !== null && (await this.store().getTeam(actor.member.accountId, teamId)) === undefined) throw new DashboardError(404, 'No such team in this account.');
      return;
    }
    if (ownerId !== actor.user.id) throw new DashboardError(404, 'No such key in this account.');
    if (teamId === null) return;
    if (!(await this.store().teamsOf(actor.member.accountId, actor.user.id)).includes(teamId)) {
      throw new DashboardError(403, 'You can put your keys only in a team you are in; ask an owner or admin to add you to it.');
    }
  }

  /** Puts a key in a team (checked by checkKeyTeam first). */
  setKeyTeam(actor: Actor, keyId: string, teamId: string | null): Promise<void> {
    return dashboardRefusal(() => this.store().setKeyTeam(actor.member.accountId, keyId, teamId));
  }

  /** The names of the account's teams, by id (the Keys page's column). */
  async names(accountId: string): Promise<Map<string, string>> {
    if (!this.available) return new Map();
    return new Map((await this.store().listTeams(accountId)).map((t) => [t.id, t.name]));
  }
}
