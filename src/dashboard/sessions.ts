// Server-side sessions: a random id in an HttpOnly cookie, only its SHA-256 in the record, a CSRF token
// per session, an absolute expiry, whether it was opened with the second factor, and the account it
// acts on. That account is checked on every request: the user must still be a member, else the
// session falls back to their personal account.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Database } from '../record/database.js';
import { membershipsOf, type Membership } from './memberships.js';
import type { SignInMethod } from './sign-in-events.js';
import { userOf, type User, type UserRow } from './users.js';

export interface Session {
  user: User;
  csrfToken: string;
  expiresAt: Date;
  /** This session was opened (or confirmed) with the TOTP code. */
  secondFactor: boolean;
  /** The account this session acts on and the user's role there; undefined when they belong to none. */
  member?: Membership;
  /** Every account the user belongs to (the account switcher). */
  memberships: Membership[];
}

export const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

export class Sessions {
  constructor(private readonly opts: { db: Database; ttlMs: number }) {}

  /** A new session of the user, acting on their personal account; an SSO one lives the (shorter) SSO life. */
  async open(user: User, secondFactor: boolean, how: { method?: SignInMethod; ttlMs?: number } = {}): Promise<{ sessionId: string; session: Session }> {
    const sessionId = randomBytes(32).toString('base64url');
    const csrfToken = randomBytes(32).toString('base64url');
    const expiresAt = new Date(Date.now() + (how.ttlMs ?? this.opts.ttlMs));
    await this.opts.db.query('INSERT INTO dashboard_sessions (id_hash, user_id, csrf_token, expires_at, second_factor, method) VALUES ($1, $2, $3, $4, $5, $6)', [
      sha256(sessionId),
      user.id,
      csrfToken,
      expiresAt,
      secondFactor,
      how.method ?? 'password',
    ]);
    const memberships = await membershipsOf(this.opts.db, user.id);
    return { sessionId, session: { user, csrfToken, expiresAt, secondFactor, memberships, ...actingMember(memberships, undefined, user) } };
  }

  /** The live session for a cookie value, or undefined (unknown or expired), with the account it acts on. */
  async load(sessionId: string): Promise<Session | undefined> {
    const r = await this.opts.db.query<UserRow & { csrf_token: string; expires_at: Date; second_factor: boolean; chosen: string | null }>(
      `UPDATE dashboard_sessions s SET last_seen_at = now() FROM dashboard_users u
        WHERE s.id_hash = $1 AND s.user_id = u.id AND s.expires_at > now()
        RETURNING s.csrf_token, s.expires_at, s.second_factor, s.account_id AS chosen, u.id, u.email, u.role, u.account_id, u.email_verified_at, u.totp_enabled_at`,
      [sha256(sessionId)],
    );
    const row = r.rows[0];
    if (row === undefined) return undefined;
    const user = userOf(row);
    const memberships = await membershipsOf(this.opts.db, user.id);
    return { csrfToken: row.csrf_token, expiresAt: row.expires_at, secondFactor: row.second_factor, user, memberships, ...actingMember(memberships, row.chosen ?? undefined, user) };
  }

  /** This session acts on `accountId` from now on (the caller has checked the membership). */
  async choose(sessionId: string, accountId: string): Promise<void> {
    await this.opts.db.query('UPDATE dashboard_sessions SET account_id = $2 WHERE id_hash = $1', [sha256(sessionId), accountId]);
  }

  async signOut(sessionId: string): Promise<void> {
    await this.opts.db.query('DELETE FROM dashboard_sessions WHERE id_hash = $1', [sha256(sessionId)]);
  }

  async signOutEverywhere(userId: string): Promise<number> {
    return (await this.opts.db.query('DELETE FROM dashboard_sessions WHERE user_id = $1', [userId])).rowCount;
  }

  static csrfMatches(session: Session, presented: unknown): boolean {
    if (typeof presented !== 'string') return false;
    const a = Buffer.from(session.csrfToken);
    const b = Buffer.from(presented);
    return a.length === b.length && timingSafeEqual(a, b);
  }
}

/** The chosen account if the user is still a member, else their personal account, else the first they belong to. */
function actingMember(memberships: Membership[], chosen: string | undefined, user: User): { member?: Membership } {
  const member = memberships.find((m) => m.accountId === chosen) ?? memberships.find((m) => m.accountId === user.accountId) ?? memberships[0];
  return member === undefined ? {} : { member };
}
