// Who belongs to which account, as the record keeps it: one row per user and account with the role
// (roles.ts). Every user owns their personal account; an organization is an account with a name and
// members. Read here; changed by organizations.ts and invitations.ts.
import type { Queryable } from '../record/database.js';
import { MEMBER_ROLES, rolesWith, type MemberRole, type Permission } from './roles.js';

export interface Membership {
  accountId: string;
  role: MemberRole;
  /** The organization's name; undefined for a personal account. */
  organization?: string;
}

interface MembershipRow {
  account_id: string;
  role: MemberRole;
  organization: string | null;
}

const SELECT_MEMBERSHIPS = `SELECT m.account_id, m.role, o.name AS organization
  FROM account_memberships m LEFT JOIN organizations o ON o.account_id = m.account_id AND o.deleted_at IS NULL`;

const membershipOf = (r: MembershipRow): Membership => ({ accountId: r.account_id, role: r.role, ...(r.organization === null ? {} : { organization: r.organization }) });

/** The accounts a user belongs to: personal first, then organizations by name. */
export async function membershipsOf(q: Queryable, userId: string): Promise<Membership[]> {
  const r = await q.query<MembershipRow>(`${SELECT_MEMBERSHIPS} WHERE m.user_id = $1 ORDER BY o.name IS NOT NULL, lower(o.name), m.account_id`, [userId]);
  return r.rows.map(membershipOf);
}

/** The account as its members see it named: the organization's name, or "Personal". */
export const accountLabel = (m: Pick<Membership, 'organization'>): string => m.organization ?? 'Personal';

/** The addresses of an account's members whose role has `permission` (whom to mail about it). */
export async function memberEmailsWith(q: Queryable, accountId: string, permission: Permission): Promise<string[]> {
  const r = await q.query<{ email: string }>(
    'SELECT u.email FROM account_memberships m JOIN dashboard_users u ON u.id = m.user_id WHERE m.account_id = $1 AND m.role = ANY($2) ORDER BY u.email',
    [accountId, rolesWith(permission)],
  );
  return r.rows.map((row) => row.email);
}

export interface MemberLine {
  userId: string;
  email: string;
  role: MemberRole;
  joinedAt: Date;
  /** Two-factor sign-in is on (the deployment's admin may clear it for a locked-out member). */
  totpEnabled: boolean;
}

/** An account's members, owners first, then by address (the admin pages and the admin API read it too). */
export async function membersOf(q: Queryable, accountId: string): Promise<MemberLine[]> {
  const r = await q.query<{ user_id: string; email: string; role: MemberRole; created_at: Date; totp: boolean }>(
    `SELECT m.user_id, u.email, m.role, m.created_at, u.totp_enabled_at IS NOT NULL AS totp FROM account_memberships m JOIN dashboard_users u ON u.id = m.user_id
      WHERE m.account_id = $1 ORDER BY array_position($2::text[], m.role), u.email`,
    [accountId, [...MEMBER_ROLES]],
  );
  return r.rows.map((row) => ({ userId: row.user_id, email: row.email, role: row.role, joinedAt: row.created_at, totpEnabled: row.totp }));
}
