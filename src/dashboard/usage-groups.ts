// Who spent what: the usage filters by member and team, checked against the account (a member may
// narrow only to themselves), and the totals of record folded per member (the member who made the key:
// its owner) or per team (the team the key was in when the request was reserved). Keys made by no
// member (the operator's, the admin API's) and requests outside any team have a group of their own.
import type { Database } from '../record/database.js';
import { addTotals, NO_USAGE, type KeyTeamDaySpend, type KeyTeamTotals, type UsageTotals } from '../record/usage-totals.js';
import { allowed, type Actor } from './actor.js';
import { DashboardError } from './errors.js';

export const USAGE_GROUPINGS = ['member', 'team'] as const;
export type UsageGrouping = (typeof USAGE_GROUPINGS)[number];

export const isUsageGrouping = (v: unknown): v is UsageGrouping => typeof v === 'string' && (USAGE_GROUPINGS as readonly string[]).includes(v);

/** A key as the usage pages see it: whose it is and which team it is in now. */
export interface UsageKey {
  id: string;
  name: string;
  ownerId?: string;
  teamId?: string;
}

/** The names behind the ids a reader's usage carries: members' addresses and teams' names. */
export interface UsageDirectory {
  /** Current members, and former ones who made a key here (their usage stays), by user id. */
  members: Map<string, string>;
  /** Every team of the account, deleted ones included (their usage names them), by id. */
  teams: Map<string, { name: string; deleted: boolean }>;
  /** The teams the reader may pick in the filter: all of them with usage.all, else their own teams and their keys'. */
  pickableTeams: string[];
  /** The member who made each key (absent: no member). */
  keyOwner: Map<string, string>;
}

export async function usageDirectory(db: Database, actor: Actor, keys: readonly UsageKey[]): Promise<UsageDirectory> {
  const accountId = actor.member.accountId;
  const owners = [...new Set(keys.flatMap((k) => (k.ownerId === undefined ? [] : [k.ownerId])))];
  const [people, teams, mine] = await Promise.all([
    db.query<{ id: string; email: string }>(
      `SELECT u.id, u.email FROM dashboard_users u
        WHERE u.id IN (SELECT user_id FROM account_memberships WHERE account_id = $1) OR u.id = ANY($2)
        ORDER BY lower(u.email), u.id`,
      [accountId, owners],
    ),
    db.query<{ id: string; name: string; deleted: boolean }>('SELECT id, name, deleted_at IS NOT NULL AS deleted FROM teams WHERE account_id = $1 ORDER BY deleted_at IS NOT NULL, lower(name), id', [accountId]),
    db.query<{ team_id: string }>('SELECT m.team_id FROM team_members m JOIN teams t ON t.id = m.team_id WHERE t.account_id = $1 AND m.user_id = $2', [accountId, actor.user.id]),
  ]);
  const all = allowed(actor, 'usage.all');
  const own = new Set([...mine.rows.map((r) => r.team_id), ...keys.flatMap((k) => (k.teamId === undefined ? [] : [k.teamId]))]);
  return {
    members: new Map(people.rows.map((r) => [r.id, r.email])),
    teams: new Map(teams.rows.map((r) => [r.id, { name: r.name, deleted: r.deleted }])),
    pickableTeams: teams.rows.filter((t) => all || own.has(t.id)).map((t) => t.id),
    keyOwner: new Map(keys.flatMap((k) => (k.ownerId === undefined ? [] : [[k.id, k.ownerId] as const]))),
  };
}

/**
 * Refuses a member or team the reader may not filter by, in words: an unknown one is a 400; another
 * member's usage, for a reader who sees only their own, is a 403.
 */
export function checkGroupFilters(actor: Actor, dir: UsageDirectory, q: { memberId?: string; teamId?: string }): void {
  if (q.memberId !== undefined) {
    if (!dir.members.has(q.memberId)) throw new DashboardError(400, 'member must be the user id of a member of this account (see /api/members).');
    if (!allowed(actor, 'usage.all') && q.memberId !== actor.user.id) throw new DashboardError(403, 'You can see only the usage of your own keys; an owner, admin or billing member sees every member\'s.');
  }
  // A member names only the teams they may see (theirs, their keys'): another team answers as an unknown one.
  if (q.teamId !== undefined && (!dir.teams.has(q.teamId) || (!allowed(actor, 'usage.all') && !dir.pickableTeams.includes(q.teamId)))) {
    throw new DashboardError(400, 'team must be the id of a team of this account (see /api/teams).');
  }
}

/** The keys a member filter leaves of those the reader may see (undefined: every key of the account). */
export function memberKeys(dir: UsageDirectory, keys: readonly UsageKey[], visible: readonly string[] | undefined, memberId: string): string[] {
  const theirs = keys.filter((k) => dir.keyOwner.get(k.id) === memberId).map((k) => k.id);
  return visible === undefined ? theirs : theirs.filter((id) => visible.includes(id));
}

/** One member's or team's totals; `id` null is the group of no member (or no team). */
export interface GroupTotals extends UsageTotals {
  id: string | null;
  label: string;
}

export const NO_MEMBER_LABEL = 'No member (operator keys)';
export const NO_TEAM_LABEL = 'No team';

function groupOf(grouping: UsageGrouping, dir: UsageDirectory, row: { keyId: string; teamId: string | null }): string | null {
  return grouping === 'member' ? (dir.keyOwner.get(row.keyId) ?? null) : row.teamId;
}

export function groupLabel(grouping: UsageGrouping, dir: UsageDirectory, id: string | null): string {
  if (grouping === 'member') return id === null ? NO_MEMBER_LABEL : (dir.members.get(id) ?? id);
  if (id === null) return NO_TEAM_LABEL;
  const t = dir.teams.get(id);
  return t === undefined ? id : t.deleted ? `${t.name} (deleted)` : t.name;
}

/** The totals per member or team, largest cost first (ties by label), and their sum. */
export function foldTotals(rows: readonly KeyTeamTotals[], grouping: UsageGrouping, dir: UsageDirectory): { groups: GroupTotals[]; total: UsageTotals } {
  const by = new Map<string | null, UsageTotals>();
  let total: UsageTotals = NO_USAGE;
  for (const r of rows) {
    const id = groupOf(grouping, dir, r);
    by.set(id, addTotals(by.get(id) ?? NO_USAGE, r));
    total = addTotals(total, r);
  }
  const groups = [...by].map(([id, t]) => ({ id, label: groupLabel(grouping, dir, id), ...t }));
  groups.sort((a, b) => b.cost - a.cost || b.requests - a.requests || a.label.localeCompare(b.label));
  return { groups, total };
}

/** The days a grouping covers, both included (UTC, YYYY-MM-DD). */
export interface UsagePeriod {
  from: string;
  to: string;
}

/** The usage of a period per member or per team: each group's totals, their sum, and the spend per day. */
export interface GroupedUsage {
  grouping: UsageGrouping;
  period: UsagePeriod;
  groups: GroupTotals[];
  total: UsageTotals;
  days: GroupDaySpend[];
}

/** One member's or team's spend on one UTC day. */
export interface GroupDaySpend {
  id: string | null;
  day: string;
  spent: number;
}

export function foldDays(rows: readonly KeyTeamDaySpend[], grouping: UsageGrouping, dir: UsageDirectory): GroupDaySpend[] {
  const by = new Map<string, GroupDaySpend>();
  for (const r of rows) {
    const id = groupOf(grouping, dir, r);
    const k = `${r.day}\u0000${id ?? ''}`;
    const cur = by.get(k);
    by.set(k, { id, day: r.day, spent: (cur?.spent ?? 0) + r.spent });
  }
  return [...by.values()].sort((a, b) => a.day.localeCompare(b.day) || (a.id ?? '').localeCompare(b.id ?? ''));
}
