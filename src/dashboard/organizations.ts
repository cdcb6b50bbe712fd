// Organizations and their members. An organization is an account like a personal one (its own balance,
// keys and top-ups), with a name and members in roles (roles.ts); its creator is its first owner. It
// always keeps at least one owner: every change of roles takes the account's membership rows under a
// lock and checks the owners left. Removing a member revokes the keys they made (their usage stays on
// record). Deleting it needs a balance of zero with nothing held: it revokes every key and removes every
// member; the account, its statement and usage stay on record.
import type { AccountService } from '../account-service/account-service.js';
import { formatUsd } from '../billing/money.js';
import type { Database, Queryable } from '../record/database.js';
import { requirePermission, type Actor } from './actor.js';
import { DashboardError } from './errors.js';
import { Identity } from './identity.js';
import type { KeyService } from './keys.js';
import { membersOf, type MemberLine, type Membership } from './memberships.js';
import { isMemberRole, MEMBER_ROLES, type MemberRole } from './roles.js';
import type { User } from './users.js';

export interface OrganizationView {
  accountId: string;
  name: string;
  createdAt: Date;
  owners: string[];
}

const MAX_NAME = 100;

function organizationName(v: unknown): string {
  const name = typeof v === 'string' ? v.trim() : '';
  if (name === '' || name.length > MAX_NAME) throw new DashboardError(400, `Give the organization a name of 1 to ${MAX_NAME} characters.`);
  return name;
}

function roleOf(v: unknown): MemberRole {
  if (!isMemberRole(v)) throw new DashboardError(400, `role must be one of ${MEMBER_ROLES.join(', ')}.`);
  return v;
}

export class Organizations {
  constructor(private readonly opts: { db: Database; accounts: AccountService; keys: KeyService }) {}

  /** Only an organization has members to manage, a name to change, and can be deleted. */
  private static requireOrganization(actor: Actor): void {
    if (actor.member.organization === undefined) throw new DashboardError(409, 'This is your personal account: create an organization to work with others.');
  }

  /** A new organization (an account of its own, with an empty balance) whose owner is its creator. */
  async create(user: User, nameIn: unknown): Promise<Membership> {
    Identity.requireConfirmed(user);
    const name = organizationName(nameIn);
    const account = await this.opts.accounts.createAccount(name);
    await this.opts.db.transaction(async (tx) => {
      await tx.query('INSERT INTO organizations (account_id, name, created_by) VALUES ($1, $2, $3)', [account.id, name, user.id]);
      await tx.query("INSERT INTO account_memberships (account_id, user_id, role) VALUES ($1, $2, 'owner')", [account.id, user.id]);
    });
    return { accountId: account.id, role: 'owner', organization: name };
  }

  async view(actor: Actor): Promise<OrganizationView> {
    Organizations.requireOrganization(actor);
    const org = (await this.opts.db.query<{ name: string; created_at: Date }>('SELECT name, created_at FROM organizations WHERE account_id = $1 AND deleted_at IS NULL', [actor.member.accountId])).rows[0];
    if (org === undefined) throw new DashboardError(404, 'This organization was deleted.');
    const owners = (await this.members(actor)).filter((m) => m.role === 'owner').map((m) => m.email);
    return { accountId: actor.member.accountId, name: org.name, createdAt: org.created_at, owners };
  }

  async rename(actor: Actor, nameIn: unknown): Promise<OrganizationView> {
    requirePermission(actor, 'organization.manage');
    Organizations.requireOrganization(actor);
    const name = organizationName(nameIn);
    await this.opts.db.query('UPDATE organizations SET name = $2 WHERE account_id = $1 AND deleted_at IS NULL', [actor.member.accountId, name]);
    return this.view({ ...actor, member: { ...actor.member, organization: name } });
  }

  /** Members, owners first, then by address. */
  async members(actor: Actor): Promise<MemberLine[]> {
    requirePermission(actor, 'members.view');
    return membersOf(this.opts.db, actor.member.accountId);
  }

  /**
   * Gives a member another role. Only an owner grants or takes away the owner role; an admin manages the
   * other roles. The last owner cannot step down (make another member owner first).
   */
  async changeRole(actor: Actor, userId: string, roleIn: unknown): Promise<MemberLine> {
    requirePermission(actor, 'members.manage');
    await this.withMembers(actor.member.accountId, async (tx, members) => {
      // Someone of another account is not found here, whatever else is wrong with the call.
      const target = members.get(userId);
      if (target === undefined) throw new DashboardError(404, 'There is no such member in this organization.');
      Organizations.requireOrganization(actor);
      const role = roleOf(roleIn);
      if (target === 'owner' || role === 'owner') requirePermission(actor, 'ownership.transfer');
      if (target === 'owner' && role !== 'owner' && ownersLeft(members, userId) === 0) throw new DashboardError(409, LAST_OWNER);
      await tx.query('UPDATE account_memberships SET role = $3 WHERE account_id = $1 AND user_id = $2', [actor.member.accountId, userId, role]);
    });
    return this.member(actor.member.accountId, userId);
  }

  /**
   * Removes a member (an owner only by an owner; the last owner never), and revokes every key they made
   * here. A member may remove themselves (leave) whatever their role, unless they are the last owner.
   */
  async remove(actor: Actor, userId: string): Promise<{ keysRevoked: number }> {
    const leaving = userId === actor.user.id;
    if (!leaving) requirePermission(actor, 'members.manage');
    await this.withMembers(actor.member.accountId, async (tx, members) => {
      const target = members.get(userId);
      if (target === undefined) throw new DashboardError(404, 'There is no such member in this organization.');
      Organizations.requireOrganization(actor);
      if (target === 'owner' && !leaving) requirePermission(actor, 'ownership.transfer');
      if (target === 'owner' && ownersLeft(members, userId) === 0) throw new DashboardError(409, LAST_OWNER);
      await tx.query('DELETE FROM account_memberships WHERE account_id = $1 AND user_id = $2', [actor.member.accountId, userId]);
      // Out of the account's teams too (the budgets of record stay beside their usage).
      await tx.query('DELETE FROM team_members m USING teams t WHERE t.id = m.team_id AND t.account_id = $1 AND m.user_id = $2', [actor.member.accountId, userId]);
    });
    return { keysRevoked: await this.opts.keys.revokeKeysOf(actor.member.accountId, userId) };
  }

  /** Makes another member an owner and the acting owner an admin. */
  async transfer(actor: Actor, userId: string): Promise<MemberLine[]> {
    requirePermission(actor, 'ownership.transfer');
    Organizations.requireOrganization(actor);
    if (userId === actor.user.id) throw new DashboardError(400, 'Choose another member to hand the organization to.');
    await this.withMembers(actor.member.accountId, async (tx, members) => {
      if (!members.has(userId)) throw new DashboardError(404, 'There is no such member in this organization.');
      await tx.query("UPDATE account_memberships SET role = 'owner' WHERE account_id = $1 AND user_id = $2", [actor.member.accountId, userId]);
      await tx.query("UPDATE account_memberships SET role = 'admin' WHERE account_id = $1 AND user_id = $2", [actor.member.accountId, actor.user.id]);
    });
    return this.members({ ...actor, member: { ...actor.member, role: 'admin' } });
  }

  /**
   * Deletes the organization once its balance is zero with nothing held: every key is revoked, every
   * member and pending invitation removed. Its account, statement and usage stay on record.
   */
  async delete(actor: Actor): Promise<{ keysRevoked: number }> {
    requirePermission(actor, 'organization.delete');
    Organizations.requireOrganization(actor);
    const accountId = actor.member.accountId;
    const { balance, held } = await this.opts.accounts.balance(accountId);
    if (balance !== 0 || held !== 0) {
      throw new DashboardError(
        409,
        `The organization still holds ${formatUsd(balance)} USD${held === 0 ? '' : ` (${formatUsd(held)} USD held by requests in flight)`}. Spend it, or ask the operator to refund it, before deleting: an organization is deleted only with a balance of 0.00.`,
      );
    }
    // The keys first, so that should anything fail the members still see the organization and can try
    // again; then once more after the members are gone, for a key made in between.
    let keysRevoked = await this.opts.keys.revokeAll(accountId);
    await this.opts.db.transaction(async (tx) => {
      await tx.query('UPDATE organizations SET deleted_at = now() WHERE account_id = $1', [accountId]);
      await tx.query('DELETE FROM account_memberships WHERE account_id = $1', [accountId]);
      await tx.query('UPDATE invitations SET revoked_at = now() WHERE account_id = $1 AND accepted_at IS NULL AND revoked_at IS NULL', [accountId]);
    });
    keysRevoked += await this.opts.keys.revokeAll(accountId);
    return { keysRevoked };
  }

  private async member(accountId: string, userId: string): Promise<MemberLine> {
    const found = (await membersOf(this.opts.db, accountId)).find((m) => m.userId === userId);
    if (found === undefined) throw new DashboardError(404, 'There is no such member in this organization.');
    return found;
  }

  /** Runs `work` with the account's membership rows locked (role by user id), so the owner count holds. */
  private withMembers(accountId: string, work: (tx: Queryable, members: Map<string, MemberRole>) => Promise<void>): Promise<void> {
    return this.opts.db.transaction(async (tx) => {
      const rows = await tx.query<{ user_id: string; role: MemberRole }>('SELECT user_id, role FROM account_memberships WHERE account_id = $1 ORDER BY user_id FOR UPDATE', [accountId]);
      await work(tx, new Map(rows.rows.map((r) => [r.user_id, r.role])));
    });
  }
}

const LAST_OWNER = 'An organization keeps at least one owner: make another member an owner first (or transfer ownership).';

const ownersLeft = (members: Map<string, MemberRole>, without: string): number => [...members].filter(([id, role]) => id !== without && role === 'owner').length;
