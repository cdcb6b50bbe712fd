// Teams and members' budgets with PostgreSQL as their record: every change commits there first with the
// team's (or the member's budgets') version bumped, then the hot path takes the budgets, version-checked
// so an older copy never overwrites a newer one, as key state does (recorded-account-store.ts). A push
// that fails is left to the sweepers (hot_version < version); a hot path that lost its data is given
// every team and member of an account again before the account's money is loaded (restore).
import { randomBase62 } from '../accounts/api-key.js';
import type { BudgetScope, RestorableAccountStore, ScopeBudgets, ScopeRecord } from '../accounts/account-store.js';
import { TeamChangeRefused, teamName, type BudgetChange, type MemberBudgets, type Team, type TeamChange, type TeamStore } from '../accounts/teams.js';
import { checkCap } from '../accounts/validation.js';
import type { Database, Queryable, SqlValue } from './database.js';

export const newTeamId = (): string => `team_${randomBase62(16)}`;

interface TeamRow {
  id: string;
  account_id: string;
  name: string;
  lifetime_budget: number | null;
  monthly_budget: number | null;
  created_ms: number;
  deleted: boolean;
  version: number;
  member_ids: string[] | null;
}

interface MemberBudgetRow {
  account_id: string;
  user_id: string;
  lifetime_budget: number | null;
  monthly_budget: number | null;
  version: number;
}

const TEAM_COLUMNS = `t.id, t.account_id, t.name, t.lifetime_budget, t.monthly_budget, (extract(epoch FROM t.created_at) * 1000)::bigint AS created_ms,
  t.deleted_at IS NOT NULL AS deleted, t.version,
  (SELECT array_agg(m.user_id ORDER BY u.email) FROM team_members m JOIN dashboard_users u ON u.id = m.user_id WHERE m.team_id = t.id) AS member_ids`;
const MEMBER_COLUMNS = 'account_id, user_id, lifetime_budget, monthly_budget, version';

function budgetsOf(r: { lifetime_budget: number | null; monthly_budget: number | null }): ScopeBudgets {
  return {
    ...(r.lifetime_budget === null ? {} : { lifetimeBudget: Number(r.lifetime_budget) }),
    ...(r.monthly_budget === null ? {} : { monthlyBudget: Number(r.monthly_budget) }),
  };
}

function toTeam(r: TeamRow): Team {
  return { id: r.id, accountId: r.account_id, name: r.name, createdAt: Number(r.created_ms), memberIds: r.member_ids ?? [], ...budgetsOf(r) };
}

/** The team as the hot path keeps it: its name, and its budgets while it exists (a deleted team limits nothing). */
function teamScope(r: TeamRow): ScopeRecord {
  return { accountId: r.account_id, scope: 'team', id: r.id, name: r.name, ...(r.deleted ? {} : budgetsOf(r)) };
}

function memberScope(r: MemberBudgetRow): ScopeRecord {
  return { accountId: r.account_id, scope: 'member', id: r.user_id, ...budgetsOf(r) };
}

function checkBudget(value: number | null | undefined, what: string): void {
  try {
    checkCap(value ?? undefined, what);
  } catch {
    throw new TeamChangeRefused('budget_invalid', `A ${what} is a whole, non-negative number of micro-USD.`);
  }
}

const isUniqueViolation = (err: unknown): boolean => typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';

/** Teams' and members' budgets one sweep pushes at most. */
const SCOPE_SWEEP_BATCH = 500;

/** The rows `sweep` pushes, as `table WHERE condition`: the key sweeper asks whether any exist before it sweeps. */
export const SCOPES_BEHIND: readonly string[] = ['teams WHERE hot_version < version', 'member_budgets WHERE hot_version < version'];

/** A team's or member's budget as the hot path and the record each have it, where they differ (reconciliation). */
export interface ScopeStateDifference {
  accountId: string;
  scope: BudgetScope;
  /** The team's id or the member's user id. */
  id: string;
  field: 'team_lifetime_budget' | 'team_monthly_budget' | 'member_lifetime_budget' | 'member_monthly_budget';
  /** The record's budget in micro-USD, -1 for none. */
  expected: number;
  actual: number;
}

/** What the teams need of the key store: moving keys between teams, with their versions and pushes. */
export interface TeamKeys {
  /** Puts the key in the team (or none), the team checked to be a live one of the account; false when no such key. */
  setKeyTeam(accountId: string, keyId: string, teamId: string | null): Promise<boolean>;
  /** Every key of the team leaves it. */
  leaveTeam(accountId: string, teamId: string): Promise<void>;
}

export interface RecordedTeamsOptions {
  db: Database;
  hot: RestorableAccountStore;
  keys: TeamKeys;
  /** A committed change could not be pushed to the hot path; the sweepers push it. */
  onPending?: (err: unknown, accountId: string, id: string) => void;
}

export class RecordedTeams implements TeamStore {
  private readonly db: Database;
  private readonly hot: RestorableAccountStore;

  constructor(private readonly opts: RecordedTeamsOptions) {
    this.db = opts.db;
    this.hot = opts.hot;
  }

  private async teamRows(where: string, params: readonly SqlValue[], q: Queryable = this.db): Promise<TeamRow[]> {
    return (await q.query<TeamRow>(`SELECT ${TEAM_COLUMNS} FROM teams t WHERE ${where}`, params)).rows;
  }

  async listTeams(accountId: string): Promise<Team[]> {
    return (await this.teamRows('t.account_id = $1 AND t.deleted_at IS NULL ORDER BY lower(t.name), t.id', [accountId])).map(toTeam);
  }

  async getTeam(accountId: string, teamId: string): Promise<Team | undefined> {
    const [row] = await this.teamRows('t.account_id = $1 AND t.id = $2 AND t.deleted_at IS NULL', [accountId, teamId]);
    return row === undefined ? undefined : toTeam(row);
  }

  async createTeam(accountId: string, nameIn: string, budgets: ScopeBudgets = {}): Promise<Team> {
    const name = teamName(nameIn);
    checkBudget(budgets.lifetimeBudget, 'lifetime budget');
    checkBudget(budgets.monthlyBudget, 'monthly budget');
    const id = newTeamId();
    try {
      await this.db.query('INSERT INTO teams (id, account_id, name, lifetime_budget, monthly_budget) VALUES ($1, $2, $3, $4, $5)', [
        id, accountId, name, budgets.lifetimeBudget ?? null, budgets.monthlyBudget ?? null,
      ]);
    } catch (err) {
      if (isUniqueViolation(err)) throw new TeamChangeRefused('name_taken', `The account has a team named ${name} already.`);
      throw err;
    }
    return this.pushedTeam(accountId, id);
  }

  async updateTeam(accountId: string, teamId: string, change: TeamChange): Promise<Team | undefined> {
    const sets: string[] = [];
    const params: SqlValue[] = [accountId, teamId];
    if (change.name !== undefined) {
      params.push(teamName(change.name));
      sets.push(`name = $${params.length}`);
    }
    for (const [field, column, what] of [['lifetimeBudget', 'lifetime_budget', 'lifetime budget'], ['monthlyBudget', 'monthly_budget', 'monthly budget']] as const) {
      const v = change[field];
      if (v === undefined) continue;
      checkBudget(v, what);
      params.push(v);
      sets.push(`${column} = $${params.length}`);
    }
    if (sets.length === 0) return this.getTeam(accountId, teamId);
    try {
      const r = await this.db.query(`UPDATE teams SET ${sets.join(', ')}, version = version + 1 WHERE account_id = $1 AND id = $2 AND deleted_at IS NULL`, params);
      if (r.rowCount === 0) return undefined;
    } catch (err) {
      if (isUniqueViolation(err)) throw new TeamChangeRefused('name_taken', `The account has a team named ${change.name ?? ''} already.`);
      throw err;
    }
    return this.pushedTeam(accountId, teamId);
  }

  async deleteTeam(accountId: string, teamId: string): Promise<boolean> {
    const r = await this.db.query('UPDATE teams SET deleted_at = now(), version = version + 1 WHERE account_id = $1 AND id = $2 AND deleted_at IS NULL', [accountId, teamId]);
    if (r.rowCount === 0) return false;
    await this.db.query('DELETE FROM team_members WHERE team_id = $1', [teamId]);
    // Its keys leave it first, so no request of theirs is reserved against a team that is gone; then the
    // hot path drops its budgets.
    await this.opts.keys.leaveTeam(accountId, teamId);
    const [row] = await this.teamRows('t.id = $1', [teamId]);
    if (row !== undefined) await this.push(teamScope(row), row.version, 'teams', 'id = $1', [row.id]);
    return true;
  }

  async setTeamMember(accountId: string, teamId: string, userId: string, inTeam: boolean): Promise<Team> {
    if ((await this.getTeam(accountId, teamId)) === undefined) throw new TeamChangeRefused('no_team', 'The account has no such team.');
    if (inTeam) {
      await this.checkMember(accountId, userId);
      await this.db.query('INSERT INTO team_members (team_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING', [teamId, userId]);
    } else {
      await this.db.query('DELETE FROM team_members WHERE team_id = $1 AND user_id = $2', [teamId, userId]);
    }
    return (await this.getTeam(accountId, teamId)) as Team;
  }

  async teamsOf(accountId: string, userId: string): Promise<string[]> {
    const r = await this.db.query<{ team_id: string }>(
      'SELECT m.team_id FROM team_members m JOIN teams t ON t.id = m.team_id WHERE t.account_id = $1 AND t.deleted_at IS NULL AND m.user_id = $2 ORDER BY m.team_id',
      [accountId, userId],
    );
    return r.rows.map((row) => row.team_id);
  }

  private async checkMember(accountId: string, userId: string): Promise<void> {
    const r = await this.db.query('SELECT 1 FROM account_memberships WHERE account_id = $1 AND user_id = $2', [accountId, userId]);
    if (r.rows.length === 0) throw new TeamChangeRefused('not_a_member', 'No member of the account has that id.');
  }

  async listMemberBudgets(accountId: string): Promise<MemberBudgets[]> {
    const r = await this.db.query<MemberBudgetRow>(
      `SELECT ${MEMBER_COLUMNS} FROM member_budgets WHERE account_id = $1 AND (lifetime_budget IS NOT NULL OR monthly_budget IS NOT NULL) ORDER BY user_id`,
      [accountId],
    );
    return r.rows.map((row) => ({ accountId, userId: row.user_id, ...budgetsOf(row) }));
  }

  async getMemberBudgets(accountId: string, userId: string): Promise<MemberBudgets> {
    const r = await this.db.query<MemberBudgetRow>(`SELECT ${MEMBER_COLUMNS} FROM member_budgets WHERE account_id = $1 AND user_id = $2`, [accountId, userId]);
    const row = r.rows[0];
    return { accountId, userId, ...(row === undefined ? {} : budgetsOf(row)) };
  }

  async setMemberBudgets(accountId: string, userId: string, change: BudgetChange): Promise<MemberBudgets> {
    checkBudget(change.lifetimeBudget, 'lifetime budget');
    checkBudget(change.monthlyBudget, 'monthly budget');
    await this.checkMember(accountId, userId);
    // A change names what it changes: the other budget keeps its value (COALESCE of "not named").
    const lifetimeNamed = change.lifetimeBudget !== undefined;
    const monthlyNamed = change.monthlyBudget !== undefined;
    const r = await this.db.query<MemberBudgetRow>(
      `INSERT INTO member_budgets (account_id, user_id, lifetime_budget, monthly_budget) VALUES ($1, $2, $3, $5)
       ON CONFLICT (account_id, user_id) DO UPDATE SET
         lifetime_budget = CASE WHEN $4 THEN EXCLUDED.lifetime_budget ELSE member_budgets.lifetime_budget END,
         monthly_budget = CASE WHEN $6 THEN EXCLUDED.monthly_budget ELSE member_budgets.monthly_budget END,
         version = member_budgets.version + 1
       RETURNING ${MEMBER_COLUMNS}`,
      [accountId, userId, change.lifetimeBudget ?? null, lifetimeNamed, change.monthlyBudget ?? null, monthlyNamed],
    );
    const row = r.rows[0] as MemberBudgetRow;
    await this.push(memberScope(row), row.version, 'member_budgets', 'account_id = $1 AND user_id = $2', [accountId, userId]);
    return { accountId, userId, ...budgetsOf(row) };
  }

  async setKeyTeam(accountId: string, keyId: string, teamId: string | null): Promise<void> {
    if (teamId !== null && (await this.getTeam(accountId, teamId)) === undefined) throw new TeamChangeRefused('no_team', 'The account has no such team.');
    if (!(await this.opts.keys.setKeyTeam(accountId, keyId, teamId))) throw new TeamChangeRefused('no_key', 'The account has no such key.');
  }

  /** The team as committed, after the hot path took it (or the sweepers were left to push it). */
  private async pushedTeam(accountId: string, teamId: string): Promise<Team> {
    const [row] = await this.teamRows('t.account_id = $1 AND t.id = $2', [accountId, teamId]);
    if (row === undefined) throw new Error(`team ${teamId} vanished`);
    await this.push(teamScope(row), row.version, 'teams', 'id = $1', [row.id]);
    return toTeam(row);
  }

  /**
   * The hot path takes a committed scope (version-checked), then the record notes it has it. A failure
   * is left to the sweepers (hot_version stays behind): the change is committed either way.
   */
  private async push(scope: ScopeRecord, version: number, table: 'teams' | 'member_budgets', where: string, params: readonly SqlValue[]): Promise<boolean> {
    try {
      await this.hot.restoreScope(scope, Number(version));
      await this.db.query(`UPDATE ${table} SET hot_version = GREATEST(hot_version, $${params.length + 1}) WHERE ${where}`, [...params, Number(version)]);
      return true;
    } catch (err) {
      this.opts.onPending?.(err, scope.accountId, scope.id);
      return false;
    }
  }

  /** Pushes every team and member budget whose newest change the hot path may lack; how many it took. */
  async sweep(): Promise<number> {
    let pushed = 0;
    for (const row of await this.teamRows('t.hot_version < t.version ORDER BY t.id LIMIT $1', [SCOPE_SWEEP_BATCH])) {
      if (await this.push(teamScope(row), row.version, 'teams', 'id = $1', [row.id])) pushed++;
    }
    const m = await this.db.query<MemberBudgetRow>(`SELECT ${MEMBER_COLUMNS} FROM member_budgets WHERE hot_version < version ORDER BY account_id, user_id LIMIT $1`, [SCOPE_SWEEP_BATCH]);
    for (const row of m.rows) if (await this.push(memberScope(row), row.version, 'member_budgets', 'account_id = $1 AND user_id = $2', [row.account_id, row.user_id])) pushed++;
    return pushed;
  }

  /** Every team and member budget of the account, as the record has them, into the hot path (after it lost them). */
  async restore(accountId: string): Promise<void> {
    for (const row of await this.teamRows('t.account_id = $1 AND t.deleted_at IS NULL', [accountId])) await this.hot.restoreScope(teamScope(row), Number(row.version));
    const m = await this.db.query<MemberBudgetRow>(`SELECT ${MEMBER_COLUMNS} FROM member_budgets WHERE account_id = $1`, [accountId]);
    for (const row of m.rows) await this.hot.restoreScope(memberScope(row), Number(row.version));
  }

  /**
   * Reconciliation's budget check: each team's and member's budgets as the hot path holds them against
   * the record. One that differs is pushed from the record again; the differences found are returned.
   */
  async reconcile(accountId: string): Promise<ScopeStateDifference[]> {
    const out: ScopeStateDifference[] = [];
    const m = await this.db.query<MemberBudgetRow>(`SELECT ${MEMBER_COLUMNS} FROM member_budgets WHERE account_id = $1`, [accountId]);
    const scopes: Array<{ record: ScopeRecord; version: number; repair: () => Promise<boolean> }> = [
      ...(await this.teamRows('t.account_id = $1 AND t.deleted_at IS NULL ORDER BY t.id', [accountId])).map((row) => ({
        record: teamScope(row),
        version: Number(row.version),
        repair: () => this.push(teamScope(row), row.version, 'teams', 'id = $1', [row.id]),
      })),
      ...m.rows.map((row) => ({
        record: memberScope(row),
        version: Number(row.version),
        repair: () => this.push(memberScope(row), row.version, 'member_budgets', 'account_id = $1 AND user_id = $2', [row.account_id, row.user_id]),
      })),
    ];
    for (const { record, repair } of scopes) {
      const hot = await this.hot.getScope(accountId, record.scope, record.id);
      const found: ScopeStateDifference[] = [];
      for (const budget of ['lifetimeBudget', 'monthlyBudget'] as const) {
        const expected = record[budget] ?? -1;
        const actual = hot?.[budget] ?? -1;
        if (expected !== actual) {
          const field = `${record.scope}_${budget === 'lifetimeBudget' ? 'lifetime' : 'monthly'}_budget` as const;
          found.push({ accountId, scope: record.scope, id: record.id, field, expected, actual });
        }
      }
      if (found.length === 0) continue;
      out.push(...found);
      await repair();
    }
    return out;
  }
}
