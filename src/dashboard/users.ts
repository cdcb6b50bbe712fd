// Dashboard users as the record keeps them: the e-mail they sign in with (lower case), an argon2id hash
// of the password, the deployment-wide role (holder, or the operator's admin), their personal account,
// whether the address is confirmed and whether TOTP is on. What counts as an address and a password.
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../record/database.js';
import { DashboardError } from './errors.js';

/** The deployment-wide role: every user is a holder; the operator's admins see every account (admin pages). */
export type Role = 'holder' | 'admin';

export interface User {
  id: string;
  email: string;
  role: Role;
  /** The user's own (personal) account; the operators' account for an admin. */
  accountId: string;
  /** The address was confirmed through a mailed link (or provisioned by the operator, or invited). */
  emailVerified: boolean;
  /** TOTP is enrolled: sign-in asks for a code. */
  totpEnabled: boolean;
}

export interface UserRow {
  id: string;
  email: string;
  password_hash: string;
  role: Role;
  account_id: string;
  email_verified_at: Date | null;
  totp_secret: string | null;
  totp_enabled_at: Date | null;
  totp_last_step: string | number | null;
}

export const USER_COLUMNS = 'id, email, password_hash, role, account_id, email_verified_at, totp_secret, totp_enabled_at, totp_last_step';

export function userOf(r: Pick<UserRow, 'id' | 'email' | 'role' | 'account_id' | 'email_verified_at' | 'totp_enabled_at'>): User {
  return { id: r.id, email: r.email, role: r.role, accountId: r.account_id, emailVerified: r.email_verified_at !== null, totpEnabled: r.totp_enabled_at !== null };
}

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,190}\.[^\s@]{1,60}$/;
export const MIN_PASSWORD = 10;
export const MAX_PASSWORD = 1024;

/** An address as stored and compared: trimmed, lower case; refused unless it looks like one. */
export function normalizeEmail(email: unknown): string {
  if (typeof email !== 'string' || !EMAIL.test(email.trim())) throw new DashboardError(400, 'Enter a valid e-mail address.');
  return email.trim().toLowerCase();
}

export function checkPassword(password: unknown): string {
  if (typeof password !== 'string' || password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) {
    throw new DashboardError(400, `Choose a password of ${MIN_PASSWORD} to ${MAX_PASSWORD} characters.`);
  }
  return password;
}

export async function findUser(q: Queryable, email: string): Promise<UserRow | undefined> {
  return (await q.query<UserRow>(`SELECT ${USER_COLUMNS} FROM dashboard_users WHERE email = $1`, [email])).rows[0];
}

export async function findUserById(q: Queryable, id: string): Promise<UserRow | undefined> {
  return (await q.query<UserRow>(`SELECT ${USER_COLUMNS} FROM dashboard_users WHERE id = $1`, [id])).rows[0];
}

/**
 * Writes a new user and makes them the owner of their personal account, in `tx`; undefined when the
 * address is taken (the unique index decides between two at once).
 */
export async function insertUser(
  tx: Queryable,
  u: { email: string; passwordHash: string; role: Role; accountId: string; confirmed: boolean },
): Promise<User | undefined> {
  const row = (
    await tx.query<UserRow>(
      `INSERT INTO dashboard_users (id, email, password_hash, role, account_id, email_verified_at) VALUES ($1, $2, $3, $4, $5, ${u.confirmed ? 'now()' : 'NULL'})
       ON CONFLICT (email) DO NOTHING RETURNING ${USER_COLUMNS}`,
      [`usr_${randomUUID()}`, u.email, u.passwordHash, u.role, u.accountId],
    )
  ).rows[0];
  if (row === undefined) return undefined;
  await ensureOwner(tx, row.account_id, row.id);
  return userOf(row);
}

/** The user owns this account (their personal one): a membership as owner, unless they have one there. */
export async function ensureOwner(tx: Queryable, accountId: string, userId: string): Promise<void> {
  await tx.query("INSERT INTO account_memberships (account_id, user_id, role) VALUES ($1, $2, 'owner') ON CONFLICT (account_id, user_id) DO NOTHING", [accountId, userId]);
}
