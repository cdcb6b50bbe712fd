// Teams and budgets: an account's named groups of members and keys, each team with a lifetime and a
// monthly budget, and each member's own budgets in the account. A key belongs to at most one team (its
// requests then draw from the team's budgets as well as from its own caps); a member may be in any
// number of teams, or none: being in a team lets a member put their own keys in it. A member's spend is
// the spend of the keys they own. The record keeps all of it (src/record/recorded-teams.ts), and the hot
// path the budgets, as it keeps a key's caps (RestorableAccountStore.restoreScope).
import type { Micros } from '../catalog/snapshot.js';
import type { ScopeBudgets } from './account-store.js';

export interface Team extends ScopeBudgets {
  id: string;
  accountId: string;
  name: string;
  createdAt: number;
  /** The members in the team (user ids), by address. */
  memberIds: string[];
}

/** A partial change of a team: what it names changes, `null` clears a budget. */
export interface TeamChange {
  name?: string;
  lifetimeBudget?: Micros | null;
  monthlyBudget?: Micros | null;
}

/** A partial change of a member's budgets: `null` clears one. */
export interface BudgetChange {
  lifetimeBudget?: Micros | null;
  monthlyBudget?: Micros | null;
}

export interface MemberBudgets extends ScopeBudgets {
  accountId: string;
  userId: string;
}

/** Why a change of teams was refused; each app words it for its reader. */
export type TeamRefusal = 'name_invalid' | 'name_taken' | 'no_team' | 'no_key' | 'not_a_member' | 'budget_invalid';

export class TeamChangeRefused extends Error {
  constructor(
    readonly reason: TeamRefusal,
    message: string,
  ) {
    super(message);
    this.name = 'TeamChangeRefused';
  }
}

export const TEAM_NAME_MAX = 60;

/** A team's name as given, trimmed: 1 to 60 characters, no line breaks (a refusal names it in a sentence). */
export function teamName(value: unknown): string {
  const name = typeof value === 'string' ? value.trim() : '';
  if (name === '' || name.length > TEAM_NAME_MAX || /[\r\n\t]/.test(name)) {
    throw new TeamChangeRefused('name_invalid', `A team's name is 1 to ${TEAM_NAME_MAX} characters on one line.`);
  }
  return name;
}

/** Teams and budgets as the account service offers them: present when accounts have a record. */
export interface TeamStore {
  listTeams(accountId: string): Promise<Team[]>;
  getTeam(accountId: string, teamId: string): Promise<Team | undefined>;
  createTeam(accountId: string, name: string, budgets?: ScopeBudgets): Promise<Team>;
  /** Changes what `change` names; undefined when the account has no such team. */
  updateTeam(accountId: string, teamId: string, change: TeamChange): Promise<Team | undefined>;
  /** Deletes the team: its keys leave it (their usage stays charged to it). False when there was none. */
  deleteTeam(accountId: string, teamId: string): Promise<boolean>;
  /** Puts a member of the account in the team, or takes them out. */
  setTeamMember(accountId: string, teamId: string, userId: string, inTeam: boolean): Promise<Team>;
  /** The teams (ids) a member is in. */
  teamsOf(accountId: string, userId: string): Promise<string[]>;
  /** Every member's budgets that are set. */
  listMemberBudgets(accountId: string): Promise<MemberBudgets[]>;
  getMemberBudgets(accountId: string, userId: string): Promise<MemberBudgets>;
  setMemberBudgets(accountId: string, userId: string, change: BudgetChange): Promise<MemberBudgets>;
  /** Puts a key in a team of its account (or in none); refused for another account's key or team. */
  setKeyTeam(accountId: string, keyId: string, teamId: string | null): Promise<void>;
}

/** An account store that keeps teams and budgets (the recorded one). */
export interface HasTeams {
  readonly teams: TeamStore;
}

export function hasTeams(store: object): store is HasTeams {
  return typeof (store as Partial<HasTeams>).teams === 'object';
}
