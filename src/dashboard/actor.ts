// Who is acting, on which account, in which role: the signed-in user and their membership of the account
// the session acts on. Every account-scoped operation of the dashboard takes one.
import { DashboardError } from './errors.js';
import type { Membership } from './memberships.js';
import { can, PERMISSION_NAMES, type Permission } from './roles.js';
import type { Session } from './sessions.js';
import type { User } from './users.js';

export interface Actor {
  user: User;
  member: Membership;
}

export function actorOf(session: Session): Actor {
  if (session.member === undefined) throw new DashboardError(403, 'You are not a member of any account any more; ask an owner to invite you again.');
  return { user: session.user, member: session.member };
}

export const allowed = (actor: Actor, permission: Permission): boolean => can(actor.member.role, permission);

/** Refuses (403) unless the actor's role has the permission, saying which role may not do what. */
export function requirePermission(actor: Actor, permission: Permission): void {
  if (!allowed(actor, permission)) {
    throw new DashboardError(403, `Your role in this account (${actor.member.role}) cannot ${PERMISSION_NAMES[permission]}; ask an owner or admin.`);
  }
}
