// Invitations to an organization, by e-mail through the outbox: a link with a single-use token (only its
// SHA-256 is stored) that expires after INVITATION_DAYS and carries the role chosen when inviting. It is
// accepted by signing in, or signing up, with the invited address (the mailed link proves the address);
// owners and admins revoke it; inviting the same address again replaces it.
import { randomBytes } from 'node:crypto';
import type { Database } from '../record/database.js';
import { requirePermission, type Actor } from './actor.js';
import { DashboardError } from './errors.js';
import type { Membership } from './memberships.js';
import { enqueueEmail } from './outbox.js';
import { isMemberRole, MEMBER_ROLES, ROLE_SUMMARIES, type MemberRole } from './roles.js';
import { sha256 } from './sessions.js';
import { normalizeEmail, type User } from './users.js';

export const INVITATION_DAYS = 7;

export interface InvitationView {
  id: string;
  email: string;
  role: MemberRole;
  invitedBy: string;
  createdAt: Date;
  expiresAt: Date;
}

/** What the invitation link shows before anyone signs in: which organization, which role, for which address. */
export interface InvitationOffer {
  email: string;
  role: MemberRole;
  organization: string;
  invitedBy: string;
  expiresAt: Date;
}

interface InvitationRow {
  id: string;
  account_id: string;
  email: string;
  role: MemberRole;
  invited_by: string;
  created_at: Date;
  expires_at: Date;
  accepted_at: Date | null;
  revoked_at: Date | null;
  organization: string | null;
}

const SELECT = `SELECT i.id, i.account_id, i.email, i.role, u.email AS invited_by, i.created_at, i.expires_at, i.accepted_at, i.revoked_at, o.name AS organization
  FROM invitations i JOIN dashboard_users u ON u.id = i.invited_by LEFT JOIN organizations o ON o.account_id = i.account_id AND o.deleted_at IS NULL`;

const view = (r: InvitationRow): InvitationView => ({ id: r.id, email: r.email, role: r.role, invitedBy: r.invited_by, createdAt: r.created_at, expiresAt: r.expires_at });

/** Why a link no longer works, in words: undefined while it does. */
function unusable(r: InvitationRow | undefined): string | undefined {
  if (r === undefined) return 'This invitation link is not valid; ask for a new one.';
  if (r.revoked_at !== null || r.organization === null) return 'This invitation was withdrawn; ask the organization for a new one.';
  if (r.accepted_at !== null) return 'This invitation was used already: each link works once. Sign in to reach the organization.';
  if (r.expires_at.getTime() <= Date.now()) return `This invitation has expired (each lasts ${INVITATION_DAYS} days); ask the organization for a new one.`;
  return undefined;
}

export class Invitations {
  constructor(private readonly opts: { db: Database }) {}

  /**
   * Invites an address to the actor's organization in a role (an owner only by an owner) and mails the
   * link through the outbox. An address already a member is refused; a pending invitation of the same
   * address is replaced (its link stops working).
   */
  async invite(actor: Actor, emailIn: unknown, roleIn: unknown, linkBase: string): Promise<InvitationView> {
    requirePermission(actor, 'members.manage');
    const organization = actor.member.organization;
    if (organization === undefined) throw new DashboardError(409, 'This is your personal account: create an organization to invite others.');
    const email = normalizeEmail(emailIn);
    if (!isMemberRole(roleIn)) throw new DashboardError(400, `role must be one of ${MEMBER_ROLES.join(', ')}.`);
    const role = roleIn;
    if (role === 'owner') requirePermission(actor, 'ownership.transfer');
    const accountId = actor.member.accountId;
    const token = randomBytes(32).toString('base64url');
    const id = `inv_${randomBytes(10).toString('base64url')}`;
    await this.opts.db.transaction(async (tx) => {
      const already = await tx.query('SELECT 1 FROM account_memberships m JOIN dashboard_users u ON u.id = m.user_id WHERE m.account_id = $1 AND u.email = $2', [accountId, email]);
      if (already.rows.length > 0) throw new DashboardError(409, `${email} is a member already; change their role on the Members page.`);
      await tx.query('UPDATE invitations SET revoked_at = now() WHERE account_id = $1 AND email = $2 AND accepted_at IS NULL AND revoked_at IS NULL', [accountId, email]);
      await tx.query(
        `INSERT INTO invitations (id, account_id, email, role, token_hash, invited_by, expires_at) VALUES ($1, $2, $3, $4, $5, $6, now() + interval '${INVITATION_DAYS} days')`,
        [id, accountId, email, role, sha256(token), actor.user.id],
      );
      await enqueueEmail(tx, {
        to: email,
        subject: `You are invited to ${organization} on Tollgate`,
        text: `${actor.user.email} invites you to the organization ${organization} on Tollgate, as ${role} (${ROLE_SUMMARIES[role]}).\n\nAccept within ${INVITATION_DAYS} days by signing in, or creating an account, with this address (${email}):\n\n${linkBase.replace(/\/$/, '')}/invitations/${token}\n\nThe link works once. If you did not expect this, ignore this message.`,
      });
    });
    return (await this.pending(actor)).find((i) => i.id === id) ?? { id, email, role, invitedBy: actor.user.email, createdAt: new Date(), expiresAt: new Date(Date.now() + INVITATION_DAYS * 86_400_000) };
  }

  /** The organization's invitations not yet accepted, revoked or expired, newest first. */
  async pending(actor: Actor): Promise<InvitationView[]> {
    requirePermission(actor, 'members.manage');
    const r = await this.opts.db.query<InvitationRow>(
      `${SELECT} WHERE i.account_id = $1 AND i.accepted_at IS NULL AND i.revoked_at IS NULL AND i.expires_at > now() ORDER BY i.created_at DESC`,
      [actor.member.accountId],
    );
    return r.rows.map(view);
  }

  /** Withdraws a pending invitation: its link stops working. */
  async revoke(actor: Actor, id: string): Promise<void> {
    requirePermission(actor, 'members.manage');
    const r = await this.opts.db.query('UPDATE invitations SET revoked_at = now() WHERE id = $1 AND account_id = $2 AND accepted_at IS NULL AND revoked_at IS NULL', [id, actor.member.accountId]);
    if (r.rowCount === 0) throw new DashboardError(404, 'There is no such pending invitation.');
  }

  /** What a link offers, while it works; otherwise a refusal saying why (410, or 404 for a link that never was). */
  async offer(token: string): Promise<InvitationOffer> {
    const row = (await this.opts.db.query<InvitationRow>(`${SELECT} WHERE i.token_hash = $1`, [sha256(token)])).rows[0];
    const why = unusable(row);
    if (why !== undefined || row === undefined) throw new DashboardError(row === undefined ? 404 : 410, why ?? '');
    return { email: row.email, role: row.role, organization: row.organization ?? '', invitedBy: row.invited_by, expiresAt: row.expires_at };
  }

  /**
   * Accepts an invitation for the signed-in user, once: the link must still work and be for their
   * address. They become a member in the invited role (a member already keeps their role), and their
   * address counts as confirmed (the link was mailed to it). Returns the membership.
   */
  async accept(token: string, user: User): Promise<Membership> {
    return this.opts.db.transaction(async (tx) => {
      const row = (await tx.query<InvitationRow>(`${SELECT} WHERE i.token_hash = $1 FOR UPDATE OF i`, [sha256(token)])).rows[0];
      const why = unusable(row);
      if (why !== undefined || row === undefined) throw new DashboardError(row === undefined ? 404 : 410, why ?? '');
      if (row.email !== user.email) throw new DashboardError(403, `This invitation is for ${row.email}: sign in with that address to accept it (you are signed in as ${user.email}).`);
      await tx.query('UPDATE invitations SET accepted_at = now(), accepted_by = $2 WHERE id = $1', [row.id, user.id]);
      const joined = await tx.query<{ role: MemberRole }>(
        `INSERT INTO account_memberships (account_id, user_id, role) VALUES ($1, $2, $3)
         ON CONFLICT (account_id, user_id) DO UPDATE SET role = account_memberships.role RETURNING role`,
        [row.account_id, user.id, row.role],
      );
      await tx.query('UPDATE dashboard_users SET email_verified_at = coalesce(email_verified_at, now()) WHERE id = $1', [user.id]);
      return { accountId: row.account_id, role: joined.rows[0]?.role ?? row.role, organization: row.organization ?? '' };
    });
  }
}
