// Users the operator makes rather than sign-up: the local run's demo user, holders provisioned while
// sign-up is closed, and the admin named in the configuration (the bootstrap at start). The operator's
// word confirms the address; any change of a user's password, role or account ends their sessions.
import { hash, verify } from '@node-rs/argon2';
import type { AccountService } from '../account-service/account-service.js';
import type { Database } from '../record/database.js';
import { DashboardError } from './errors.js';
import { ensureOwner, findUser, insertUser, MAX_PASSWORD, MIN_PASSWORD, normalizeEmail, userOf, USER_COLUMNS, type Role, type User, type UserRow } from './users.js';

/** What the admin bootstrap did at start. */
export type AdminBootstrap = { outcome: 'created' | 'unchanged' | 'updated' | 'promoted'; user: User } | { outcome: 'refused'; message: string };

export class Provisioning {
  constructor(private readonly opts: { db: Database; accounts: AccountService }) {}

  /**
   * Creates the user of an existing account (its owner), or sets the password, role and account of the
   * one with this e-mail (who then owns that account too). Any change ends every session of that user.
   */
  async upsertUser(emailIn: string, password: string, accountId: string, role: Role = 'holder'): Promise<User> {
    const email = normalizeEmail(emailIn);
    if (password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) throw new DashboardError(400, `A password has ${MIN_PASSWORD} to ${MAX_PASSWORD} characters.`);
    if ((await this.opts.accounts.getAccount(accountId)) === undefined) throw new DashboardError(404, `No account ${accountId}.`);
    const created = await this.insert(email, password, accountId, role);
    if (created !== undefined) return created;
    return (await this.update(email, password, accountId, role)).user;
  }

  /** A new user with a confirmed address, or undefined when the address is taken. */
  private async insert(email: string, password: string, accountId: string, role: Role): Promise<User | undefined> {
    if ((await findUser(this.opts.db, email)) !== undefined) return undefined;
    const passwordHash = await hash(password);
    return this.opts.db.transaction((tx) => insertUser(tx, { email, passwordHash, role, accountId, confirmed: true }));
  }

  /** Sets password, role and account; when any of them changes, every session of the user ends. */
  private async update(email: string, password: string, accountId: string, role: Role): Promise<{ user: User; changed: boolean }> {
    const row = await findUser(this.opts.db, email);
    if (row === undefined) throw new Error(`no dashboard user ${email}`);
    const samePassword = await verify(row.password_hash, password).catch(() => false);
    const changed = !samePassword || row.role !== role || row.account_id !== accountId;
    const passwordHash = samePassword ? row.password_hash : await hash(password);
    const updated = await this.opts.db.transaction(async (tx) => {
      const r = await tx.query<UserRow>(
        `UPDATE dashboard_users SET password_hash = $2, role = $3, account_id = $4, email_verified_at = coalesce(email_verified_at, now()) WHERE id = $1 RETURNING ${USER_COLUMNS}`,
        [row.id, passwordHash, role, accountId],
      );
      await ensureOwner(tx, accountId, row.id);
      if (changed) await tx.query('DELETE FROM dashboard_sessions WHERE user_id = $1', [row.id]);
      return r.rows[0];
    });
    if (updated === undefined) throw new Error(`dashboard user ${email} vanished`);
    return { user: userOf(updated), changed };
  }

  /**
   * The admin named in the configuration, at start. A new address becomes an admin of the operators'
   * account; an existing admin keeps its place (its password set again if it changed, which ends its
   * sessions). An address that belongs to a holder is refused (anyone may have signed it up before the
   * operator configured it) unless the operator names it as a promotion: then it becomes admin, keeps
   * its account, and every session it had ends.
   */
  async bootstrapAdmin(emailIn: string, password: string, operatorsAccountId: string, promote: boolean): Promise<AdminBootstrap> {
    const email = normalizeEmail(emailIn);
    if (password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) throw new DashboardError(400, `DASHBOARD_ADMIN_PASSWORD must have ${MIN_PASSWORD} to ${MAX_PASSWORD} characters.`);
    const created = await this.insert(email, password, operatorsAccountId, 'admin');
    if (created !== undefined) return { outcome: 'created', user: created };
    const existing = await findUser(this.opts.db, email);
    if (existing === undefined) throw new Error(`dashboard user ${email} vanished`);
    if (existing.role === 'admin') {
      const { user, changed } = await this.update(email, password, existing.account_id, 'admin');
      return { outcome: changed ? 'updated' : 'unchanged', user };
    }
    if (!promote) {
      return {
        outcome: 'refused',
        message: `DASHBOARD_ADMIN_EMAIL ${email} belongs to an existing holder (account ${existing.account_id}); it was NOT made admin. If that holder is yours, set DASHBOARD_ADMIN_PROMOTE=true once to promote it (its sessions end); otherwise choose another address.`,
      };
    }
    const { user } = await this.update(email, password, existing.account_id, 'admin');
    // A promotion always ends the holder's sessions, even with the same password: none of them was an admin's.
    await this.opts.db.query('DELETE FROM dashboard_sessions WHERE user_id = $1', [user.id]);
    return { outcome: 'promoted', user };
  }
}
