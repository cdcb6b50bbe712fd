// The dashboard's one service layer: pages and the JSON API both call it, so a rule (ownership, caps,
// secrets shown once) is written once. Every key operation is scoped to the signed-in user's account.
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { hash, verify } from '@node-rs/argon2';
import { ClientError } from '../http/client-error.js';
import type { AccountStore, ApiKeyRecord, KeyCaps, KeyChange, KeyRequestCeiling } from '../accounts/account-store.js';
import type { Ledger } from '../billing/ledger.js';
import { usdTextToMicros } from '../billing/money.js';
import { AccountService } from '../accounts/service.js';
import { MAX_RATE_LIMIT, type RateLimits } from '../accounts/rate-limits.js';
import type { Database, Queryable } from '../record/database.js';
import { statementPage, type StatementPage } from '../record/statement.js';
import { UsageQueryError } from '../record/usage-query.js';
import { defaultThrottles, THROTTLED_MESSAGE, type AttemptThrottle, type Throttles } from './throttle.js';
import { enqueueEmail } from './outbox.js';
import { checkTotp, newTotpEnrolment, TOTP_SECRET, type TotpEnrolment } from './totp.js';
import { clearSecondFactor, consumeSecondFactor, disableTotp, enableTotp, recoveryCodesLeft, replaceRecoveryCodes, secondFactorGiven, type ClearedBy } from './two-factor.js';

export type Role = 'holder' | 'admin';

export interface User {
  id: string;
  email: string;
  role: Role;
  accountId: string;
  /** The address was confirmed through a mailed link (or provisioned by the operator). */
  emailVerified: boolean;
  /** TOTP is enrolled: sign-in asks for a code. */
  totpEnabled: boolean;
}

export interface Session {
  user: User;
  csrfToken: string;
  expiresAt: Date;
  /** This session was opened (or confirmed) with the TOTP code. */
  secondFactor: boolean;
}

export interface KeyView {
  id: string;
  name: string;
  displayHint: string;
  createdAt: number;
  state: 'active' | 'revoked';
  revokedAt?: number;
  lifetimeCap?: number;
  monthlyCap?: number;
  /** The key's default cost ceiling per request, micro-USD. */
  maxCostPerRequest?: number;
  lifetimeSpent: number;
  monthSpent: number;
  held: number;
  /** Unix ms of the key's last request of record. */
  lastUsedAt?: number;
  /** The key's own rate limits (each overrides the account's default for keys). */
  rateLimits?: RateLimits;
}

/**
 * An error of the dashboard's own the caller may see: status plus an actionable message. Its own class
 * (not just ClientError), so a form that re-renders itself on its own errors lets other apps' through.
 */
export class DashboardError extends ClientError {}

export interface DashboardServiceOptions {
  db: Database;
  accounts: AccountStore;
  ledger: Ledger;
  signUp: boolean;
  sessionTtlMs: number;
  /** Attempt budgets of sign-in, sign-up and password reset (defaults: throttle.ts). */
  throttles?: Partial<Throttles>;
  /** Admin pages and the admin API need a session opened with TOTP (DASHBOARD_ADMIN_REQUIRE_TOTP). */
  adminRequiresTotp?: boolean;
  /** Called after a key is revoked so an in-process gateway drops cached lookups at once. */
  onRevoke?: () => void;
  /** Structured log lines of what must be on record (an admin clearing a user's two-factor sign-in); default stderr. */
  log?: (line: string) => void;
}

/** A dashboard user as the admin pages list them. */
export interface UserLine {
  id: string;
  email: string;
  role: Role;
  totpEnabled: boolean;
}

/** What a password reset link leads to: expired, or valid (and whether the user must give a second factor). */
export interface ResetTokenState {
  valid: boolean;
  secondFactor: boolean;
}

/** The second factor a form asks for, in words (sign-in, reset, turning it off). */
const SECOND_FACTOR_NEEDED = 'Enter the 6-digit code from your authenticator app, or one of your recovery codes.';
const SECOND_FACTOR_WRONG = 'Wrong or already used code: enter the current code from your authenticator app, or an unused recovery code.';

/** What the admin bootstrap did at start. */
export type AdminBootstrap = { outcome: 'created' | 'unchanged' | 'updated' | 'promoted'; user: User } | { outcome: 'refused'; message: string };

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,190}\.[^\s@]{1,60}$/;
const MIN_PASSWORD = 10;
const MAX_PASSWORD = 1024;
const VERIFY_HOURS = 48;

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

interface UserRow {
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

const USER_COLUMNS = 'id, email, password_hash, role, account_id, email_verified_at, totp_secret, totp_enabled_at, totp_last_step';

function userOf(r: Pick<UserRow, 'id' | 'email' | 'role' | 'account_id' | 'email_verified_at' | 'totp_enabled_at'>): User {
  return { id: r.id, email: r.email, role: r.role, accountId: r.account_id, emailVerified: r.email_verified_at !== null, totpEnabled: r.totp_enabled_at !== null };
}

export class DashboardService {
  private readonly throttles: Throttles;
  // Verified against when the e-mail is unknown, so a miss costs as long as a wrong password.
  private readonly decoy: Promise<string>;

  /** Accounts and keys change through the one account service (a revoke tells the key cache there). */
  readonly accounts: AccountService;

  constructor(private readonly opts: DashboardServiceOptions) {
    this.accounts = new AccountService({ accounts: opts.accounts, ledger: opts.ledger, ...(opts.onRevoke === undefined ? {} : { onRevoke: opts.onRevoke }) });
    this.throttles = defaultThrottles(opts.throttles);
    this.decoy = hash(randomBytes(16).toString('hex'));
  }

  get signUpOpen(): boolean {
    return this.opts.signUp;
  }

  get adminRequiresTotp(): boolean {
    return this.opts.adminRequiresTotp === true;
  }

  /** The parts the other page modules (usage, refunds, admin) read through. */
  get db(): Database {
    return this.opts.db;
  }

  /** Takes one attempt from a budget before any costly work, or refuses with the one throttled answer. */
  private static attempt(throttle: AttemptThrottle, subject: string, address: string): void {
    const wait = throttle.take(subject, address);
    if (wait > 0) throw new DashboardError(429, THROTTLED_MESSAGE(wait), wait);
  }

  /**
   * Starts a password reset: for a known address, a single-use token (stored hashed, valid an hour) is
   * mailed as a link under `linkBase`. The answer is the same whether the address is known or not.
   */
  async requestPasswordReset(emailIn: unknown, linkBase: string, address: string): Promise<void> {
    const email = DashboardService.normalizeEmail(emailIn);
    DashboardService.attempt(this.throttles.resetRequest, email, address);
    const found = await this.opts.db.query<{ id: string }>('SELECT id FROM dashboard_users WHERE email = $1', [email]);
    const user = found.rows[0];
    if (user === undefined) return;
    const token = randomBytes(32).toString('base64url');
    await this.opts.db.transaction(async (tx) => {
      await tx.query("INSERT INTO password_resets (token_hash, user_id, expires_at) VALUES ($1, $2, now() + interval '1 hour')", [sha256(token), user.id]);
      await enqueueEmail(tx, {
        to: email,
        subject: 'Reset your Tollgate password',
        text: `Someone (hopefully you) asked to reset the password of ${email}. Choose a new one here within an hour:\n\n${linkBase.replace(/\/$/, '')}/password-reset/${token}\n\nIf it was not you, ignore this message; your password is unchanged.`,
      });
    });
  }

  /** Whether a reset token is valid now, and whether its user must give a second factor (for the page that asks for the new password). */
  async resetTokenState(token: string): Promise<ResetTokenState> {
    const r = await this.opts.db.query<{ totp: boolean }>(
      'SELECT u.totp_enabled_at IS NOT NULL AS totp FROM password_resets r JOIN dashboard_users u ON u.id = r.user_id WHERE r.token_hash = $1 AND r.expires_at > now()',
      [sha256(token)],
    );
    const row = r.rows[0];
    return { valid: row !== undefined, secondFactor: row?.totp === true };
  }

  /**
   * Sets the new password once per token, and ends every session of the user. A user with two-factor
   * sign-in must give a code or a recovery code as well (the mailbox alone does not pass the second
   * factor); without either, only the deployment's admin can turn it off. A refusal leaves the link usable.
   */
  async resetPassword(token: string, password: unknown, address: string, secondFactor?: unknown): Promise<void> {
    if (typeof password !== 'string' || password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) {
      throw new DashboardError(400, `Choose a password of ${MIN_PASSWORD} to ${MAX_PASSWORD} characters.`);
    }
    DashboardService.attempt(this.throttles.resetSubmit, sha256(token), address);
    const passwordHash = await hash(password);
    await this.opts.db.transaction(async (tx) => {
      const used = await tx.query<{ user_id: string }>('DELETE FROM password_resets WHERE token_hash = $1 AND expires_at > now() RETURNING user_id', [sha256(token)]);
      const userId = used.rows[0]?.user_id;
      if (userId === undefined) throw new DashboardError(400, 'This reset link has expired or was used already; ask for a new one.');
      const user = (await tx.query<{ email: string; totp_secret: string | null; totp_enabled_at: Date | null }>('SELECT email, totp_secret, totp_enabled_at FROM dashboard_users WHERE id = $1 FOR UPDATE', [userId])).rows[0];
      if (user?.totp_enabled_at !== null && user?.totp_enabled_at !== undefined && user.totp_secret !== null) {
        const lost = ` Lost both? Ask the operator of this Tollgate to turn two-factor sign-in off for ${user.email}.`;
        if (secondFactorGiven(secondFactor) === undefined) throw new DashboardError(400, `This account has two-factor sign-in. ${SECOND_FACTOR_NEEDED}${lost}`);
        if ((await consumeSecondFactor(tx, { id: userId, totpSecret: user.totp_secret }, secondFactor)) === undefined) throw new DashboardError(400, `${SECOND_FACTOR_WRONG}${lost}`);
      }
      // The link arrived by mail, so it proves the address as well.
      await tx.query('UPDATE dashboard_users SET password_hash = $2, email_verified_at = coalesce(email_verified_at, now()) WHERE id = $1', [userId, passwordHash]);
      await tx.query('DELETE FROM dashboard_sessions WHERE user_id = $1', [userId]);
      await tx.query('DELETE FROM password_resets WHERE user_id = $1', [userId]);
    });
  }

  /** Removes expired sessions, reset and confirmation tokens and key reveals (a periodic job). */
  async purgeExpired(): Promise<number> {
    let n = 0;
    for (const table of ['dashboard_sessions', 'password_resets', 'email_verifications', 'key_reveals']) {
      n += (await this.opts.db.query(`DELETE FROM ${table} WHERE expires_at <= now()`)).rowCount;
    }
    return n;
  }

  private static normalizeEmail(email: unknown): string {
    if (typeof email !== 'string' || !EMAIL.test(email.trim())) throw new DashboardError(400, 'Enter a valid e-mail address.');
    return email.trim().toLowerCase();
  }

  private static checkPassword(password: unknown): string {
    if (typeof password !== 'string' || password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) {
      throw new DashboardError(400, `Choose a password of ${MIN_PASSWORD} to ${MAX_PASSWORD} characters.`);
    }
    return password;
  }

  /**
   * Opens an account whose address is not yet confirmed: a link is mailed (through the outbox) and the
   * account can create keys or top up only once it is followed.
   */
  async signUp(emailIn: unknown, passwordIn: unknown, address: string, linkBase: string): Promise<{ user: User; sessionId: string; session: Session }> {
    if (!this.opts.signUp) throw new DashboardError(403, 'Sign-up is closed on this Tollgate; ask the operator for an account.');
    const email = DashboardService.normalizeEmail(emailIn);
    const password = DashboardService.checkPassword(passwordIn);
    DashboardService.attempt(this.throttles.signUp, email, address);
    const existing = await this.opts.db.query('SELECT 1 FROM dashboard_users WHERE email = $1', [email]);
    if (existing.rows.length > 0) throw new DashboardError(409, 'An account with this e-mail already exists; sign in instead.');
    const passwordHash = await hash(password); // @node-rs/argon2 defaults to argon2id
    const account = await this.accounts.createAccount(email);
    const user: User = { id: `usr_${randomUUID()}`, email, role: 'holder', accountId: account.id, emailVerified: false, totpEnabled: false };
    try {
      await this.opts.db.transaction(async (tx) => {
        await tx.query('INSERT INTO dashboard_users (id, email, password_hash, role, account_id) VALUES ($1, $2, $3, $4, $5)', [user.id, email, passwordHash, user.role, user.accountId]);
        await this.mailConfirmation(tx, user, linkBase);
      });
    } catch (err) {
      // Two sign-ups racing on one e-mail: the unique index decides; the loser's empty account stays unused.
      if ((err as { code?: string }).code === '23505') throw new DashboardError(409, 'An account with this e-mail already exists; sign in instead.');
      throw err;
    }
    const { sessionId, session } = await this.openSession(user, false);
    return { user, sessionId, session };
  }

  private async mailConfirmation(tx: Queryable, user: User, linkBase: string): Promise<void> {
    const token = randomBytes(32).toString('base64url');
    await tx.query(`INSERT INTO email_verifications (token_hash, user_id, expires_at) VALUES ($1, $2, now() + interval '${VERIFY_HOURS} hours')`, [sha256(token), user.id]);
    await enqueueEmail(tx, {
      to: user.email,
      subject: 'Confirm your Tollgate e-mail address',
      text: `Someone (hopefully you) opened a Tollgate account with ${user.email}. Confirm the address within ${VERIFY_HOURS} hours to create API keys and add money:\n\n${linkBase.replace(/\/$/, '')}/verify-email/${token}\n\nIf it was not you, ignore this message.`,
    });
  }

  /** Mails a new confirmation link to a signed-in user whose address is not confirmed yet. */
  async resendConfirmation(user: User, linkBase: string, address: string): Promise<void> {
    if (user.emailVerified) return;
    DashboardService.attempt(this.throttles.resetRequest, `verify:${user.id}`, address);
    await this.opts.db.transaction((tx) => this.mailConfirmation(tx, user, linkBase));
  }

  /** Follows a confirmation link (single use); the address is confirmed. */
  async confirmEmail(token: string): Promise<void> {
    await this.opts.db.transaction(async (tx) => {
      const used = await tx.query<{ user_id: string }>('DELETE FROM email_verifications WHERE token_hash = $1 AND expires_at > now() RETURNING user_id', [sha256(token)]);
      const userId = used.rows[0]?.user_id;
      if (userId === undefined) throw new DashboardError(400, 'This confirmation link has expired or was used already; sign in and ask for a new one.');
      await tx.query('UPDATE dashboard_users SET email_verified_at = coalesce(email_verified_at, now()) WHERE id = $1', [userId]);
      await tx.query('DELETE FROM email_verifications WHERE user_id = $1', [userId]);
    });
  }

  /** Keys and top-ups need a confirmed address. */
  static requireConfirmed(user: User): void {
    if (!user.emailVerified) {
      throw new DashboardError(403, `Confirm your e-mail address first: open the link we mailed to ${user.email} (the Keys page can send it again).`);
    }
  }

  /**
   * Creates the user of an existing account, or sets the password, role and account of the one with
   * this e-mail (the local run's demo sign-in, and operators provisioning a holder while sign-up is
   * closed). The address is the operator's word, so it counts as confirmed. Any change ends every
   * session of that user.
   */
  async upsertUser(emailIn: string, password: string, accountId: string, role: Role = 'holder'): Promise<User> {
    const email = DashboardService.normalizeEmail(emailIn);
    if (password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) throw new DashboardError(400, `A password has ${MIN_PASSWORD} to ${MAX_PASSWORD} characters.`);
    if ((await this.accounts.getAccount(accountId)) === undefined) throw new DashboardError(404, `No account ${accountId}.`);
    const created = await this.insertUser(email, password, accountId, role);
    if (created !== undefined) return created;
    return (await this.updateUser(email, password, accountId, role)).user;
  }

  /** A new user with a confirmed address, or undefined when the address is taken. */
  private async insertUser(email: string, password: string, accountId: string, role: Role): Promise<User | undefined> {
    if ((await this.findUser(email)) !== undefined) return undefined;
    const row = (
      await this.opts.db.query<UserRow>(
        `INSERT INTO dashboard_users (id, email, password_hash, role, account_id, email_verified_at) VALUES ($1, $2, $3, $4, $5, now())
         ON CONFLICT (email) DO NOTHING RETURNING ${USER_COLUMNS}`,
        [`usr_${randomUUID()}`, email, await hash(password), role, accountId],
      )
    ).rows[0];
    return row === undefined ? undefined : userOf(row);
  }

  private async findUser(email: string): Promise<UserRow | undefined> {
    return (await this.opts.db.query<UserRow>(`SELECT ${USER_COLUMNS} FROM dashboard_users WHERE email = $1`, [email])).rows[0];
  }

  /** Sets password, role and account; when any of them changes, every session of the user ends. */
  private async updateUser(email: string, password: string, accountId: string, role: Role): Promise<{ user: User; changed: boolean }> {
    const row = await this.findUser(email);
    if (row === undefined) throw new Error(`no dashboard user ${email}`);
    const samePassword = await verify(row.password_hash, password).catch(() => false);
    const changed = !samePassword || row.role !== role || row.account_id !== accountId;
    const passwordHash = samePassword ? row.password_hash : await hash(password);
    const updated = await this.opts.db.transaction(async (tx) => {
      const r = await tx.query<UserRow>(
        `UPDATE dashboard_users SET password_hash = $2, role = $3, account_id = $4, email_verified_at = coalesce(email_verified_at, now()) WHERE id = $1 RETURNING ${USER_COLUMNS}`,
        [row.id, passwordHash, role, accountId],
      );
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
    const email = DashboardService.normalizeEmail(emailIn);
    if (password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) throw new DashboardError(400, `DASHBOARD_ADMIN_PASSWORD must have ${MIN_PASSWORD} to ${MAX_PASSWORD} characters.`);
    const created = await this.insertUser(email, password, operatorsAccountId, 'admin');
    if (created !== undefined) return { outcome: 'created', user: created };
    const existing = await this.findUser(email);
    if (existing === undefined) throw new Error(`dashboard user ${email} vanished`);
    if (existing.role === 'admin') {
      const { user, changed } = await this.updateUser(email, password, existing.account_id, 'admin');
      return { outcome: changed ? 'updated' : 'unchanged', user };
    }
    if (!promote) {
      return {
        outcome: 'refused',
        message: `DASHBOARD_ADMIN_EMAIL ${email} belongs to an existing holder (account ${existing.account_id}); it was NOT made admin. If that holder is yours, set DASHBOARD_ADMIN_PROMOTE=true once to promote it (its sessions end); otherwise choose another address.`,
      };
    }
    const { user } = await this.updateUser(email, password, existing.account_id, 'admin');
    // A promotion always ends the holder's sessions, even with the same password: none of them was an admin's.
    await this.opts.db.query('DELETE FROM dashboard_sessions WHERE user_id = $1', [user.id]);
    return { outcome: 'promoted', user };
  }

  async signIn(emailIn: unknown, password: unknown, address: string, previousSessionId?: string, codeIn?: unknown): Promise<{ sessionId: string; session: Session }> {
    const email = typeof emailIn === 'string' ? emailIn.trim().toLowerCase() : '';
    // Counted before argon2 runs: guesses sent at once each take their own attempt.
    DashboardService.attempt(this.throttles.signIn, email, address);
    const row = email === '' ? undefined : await this.findUser(email);
    const pw = typeof password === 'string' && password.length <= MAX_PASSWORD ? password : '';
    const ok = await verify(row?.password_hash ?? (await this.decoy), pw);
    if (row === undefined || !ok) throw new DashboardError(401, 'Wrong e-mail or password.');
    let secondFactor = false;
    if (row.totp_enabled_at !== null && row.totp_secret !== null) {
      if (secondFactorGiven(codeIn) === undefined) throw new DashboardError(401, `Two-factor sign-in is on. ${SECOND_FACTOR_NEEDED}`);
      if ((await consumeSecondFactor(this.opts.db, { id: row.id, totpSecret: row.totp_secret }, codeIn)) === undefined) throw new DashboardError(401, SECOND_FACTOR_WRONG);
      secondFactor = true;
    }
    this.throttles.signIn.succeed(email, address);
    // Rotation: whatever session the browser brought is ended, and a new id is issued.
    if (previousSessionId !== undefined) await this.signOut(previousSessionId);
    return this.openSession(userOf(row), secondFactor);
  }

  /** A fresh TOTP secret for the enrolment page (nothing stored until a code confirms it). */
  totpEnrolment(user: User): TotpEnrolment {
    return newTotpEnrolment(user.email);
  }

  /**
   * The signed-in user's own password again, before a change of the second factor (a session left open
   * is not enough to change it). Counted against the sign-in budget, as a sign-in is.
   */
  private async confirmPassword(user: User, password: unknown, address: string): Promise<UserRow> {
    DashboardService.attempt(this.throttles.signIn, user.email, address);
    const row = await this.findUser(user.email);
    const pw = typeof password === 'string' && password.length <= MAX_PASSWORD ? password : '';
    if (row === undefined || !(await verify(row.password_hash, pw))) throw new DashboardError(403, 'Wrong password: enter the password you sign in with.');
    this.throttles.signIn.succeed(user.email, address);
    return row;
  }

  /**
   * Turns TOTP on with the secret the enrolment page showed, once the password and a code from the
   * secret check out. This session counts as opened with the second factor; every other session of the
   * user ends. The ten recovery codes are returned to be shown this once.
   */
  async enableTotp(user: User, sessionId: string, input: { password: unknown; secret: unknown; code: unknown }, address: string): Promise<string[]> {
    if (user.totpEnabled) throw new DashboardError(409, 'Two-factor sign-in is already on for this account.');
    const { secret } = input;
    if (typeof secret !== 'string' || !TOTP_SECRET.test(secret)) throw new DashboardError(400, 'The setup form is damaged; reload the page and start again.');
    await this.confirmPassword(user, input.password, address);
    const code = typeof input.code === 'string' ? input.code.replace(/\s/g, '') : '';
    const step = checkTotp(secret, code);
    if (step === undefined) throw new DashboardError(400, 'That code does not match; check the time on your phone and enter the current code.');
    return this.opts.db.transaction(async (tx) => {
      if (!(await enableTotp(tx, user.id, secret, step))) throw new DashboardError(409, 'Two-factor sign-in is already on for this account.');
      const codes = await replaceRecoveryCodes(tx, user.id);
      await tx.query('UPDATE dashboard_sessions SET second_factor = true WHERE id_hash = $1', [sha256(sessionId)]);
      await tx.query('DELETE FROM dashboard_sessions WHERE user_id = $1 AND id_hash <> $2', [user.id, sha256(sessionId)]);
      return codes;
    });
  }

  /** The password and a current code (or a recovery code) of a user with TOTP on, checked and used up in `tx`. */
  private async confirmSecondFactor(tx: Queryable, row: UserRow, code: unknown): Promise<void> {
    if (row.totp_enabled_at === null || row.totp_secret === null) throw new DashboardError(409, 'Two-factor sign-in is off for this account.');
    if (secondFactorGiven(code) === undefined) throw new DashboardError(400, SECOND_FACTOR_NEEDED);
    if ((await consumeSecondFactor(tx, { id: row.id, totpSecret: row.totp_secret }, code)) === undefined) throw new DashboardError(403, SECOND_FACTOR_WRONG);
  }

  /**
   * Turns TOTP off: the password and a current code or a recovery code. The recovery codes go with it,
   * and no session of the user counts as opened with a second factor any more.
   */
  async disableTotp(user: User, input: { password: unknown; code: unknown }, address: string): Promise<void> {
    const row = await this.confirmPassword(user, input.password, address);
    await this.opts.db.transaction(async (tx) => {
      await this.confirmSecondFactor(tx, row, input.code);
      await disableTotp(tx, user.id);
      await tx.query('UPDATE dashboard_sessions SET second_factor = false WHERE user_id = $1', [user.id]);
    });
  }

  /** Ten new recovery codes in place of the old ones (the password and a current code); shown this once. */
  async newRecoveryCodes(user: User, input: { password: unknown; code: unknown }, address: string): Promise<string[]> {
    const row = await this.confirmPassword(user, input.password, address);
    return this.opts.db.transaction(async (tx) => {
      await this.confirmSecondFactor(tx, row, input.code);
      return replaceRecoveryCodes(tx, user.id);
    });
  }

  /** How many of the user's recovery codes are left unused. */
  recoveryCodesLeft(user: User): Promise<number> {
    return recoveryCodesLeft(this.opts.db, user.id);
  }

  /** The dashboard users of an account, for the admin pages. */
  async usersOfAccount(accountId: string): Promise<UserLine[]> {
    const r = await this.opts.db.query<UserRow>(`SELECT ${USER_COLUMNS} FROM dashboard_users WHERE account_id = $1 ORDER BY email`, [accountId]);
    return r.rows.map((row) => ({ id: row.id, email: row.email, role: row.role, totpEnabled: row.totp_enabled_at !== null }));
  }

  /**
   * The deployment's admin turns a user's two-factor sign-in off (phone and recovery codes lost): see
   * clearSecondFactor. The user must belong to `accountId` (the page it was asked from). False when it was off.
   */
  async clearSecondFactor(by: ClearedBy, accountId: string, userId: string): Promise<boolean> {
    const owner = await this.opts.db.query('SELECT 1 FROM dashboard_users WHERE id = $1 AND account_id = $2', [userId, accountId]);
    if (owner.rows.length === 0) throw new DashboardError(404, 'There is no such user on this account.');
    const done = await clearSecondFactor(this.opts.db, { userId }, by, this.opts.log ?? ((l) => process.stderr.write(`${l}\n`)));
    return done?.cleared === true;
  }

  private async openSession(user: User, secondFactor: boolean): Promise<{ sessionId: string; session: Session }> {
    const sessionId = randomBytes(32).toString('base64url');
    const csrfToken = randomBytes(32).toString('base64url');
    const expiresAt = new Date(Date.now() + this.opts.sessionTtlMs);
    await this.opts.db.query('INSERT INTO dashboard_sessions (id_hash, user_id, csrf_token, expires_at, second_factor) VALUES ($1, $2, $3, $4, $5)', [
      sha256(sessionId),
      user.id,
      csrfToken,
      expiresAt,
      secondFactor,
    ]);
    return { sessionId, session: { user, csrfToken, expiresAt, secondFactor } };
  }

  /** The live session for a cookie value, or undefined (unknown or expired). */
  async session(sessionId: string): Promise<Session | undefined> {
    const r = await this.opts.db.query<UserRow & { csrf_token: string; expires_at: Date; second_factor: boolean }>(
      `UPDATE dashboard_sessions s SET last_seen_at = now() FROM dashboard_users u
        WHERE s.id_hash = $1 AND s.user_id = u.id AND s.expires_at > now()
        RETURNING s.csrf_token, s.expires_at, s.second_factor, u.id, u.email, u.role, u.account_id, u.email_verified_at, u.totp_enabled_at`,
      [sha256(sessionId)],
    );
    const row = r.rows[0];
    if (row === undefined) return undefined;
    return { csrfToken: row.csrf_token, expiresAt: row.expires_at, secondFactor: row.second_factor, user: userOf(row) };
  }

  static csrfMatches(session: Session, presented: unknown): boolean {
    if (typeof presented !== 'string') return false;
    const a = Buffer.from(session.csrfToken);
    const b = Buffer.from(presented);
    return a.length === b.length && timingSafeEqual(a, b);
  }

  async signOut(sessionId: string): Promise<void> {
    await this.opts.db.query('DELETE FROM dashboard_sessions WHERE id_hash = $1', [sha256(sessionId)]);
  }

  async signOutEverywhere(user: User): Promise<number> {
    return (await this.opts.db.query('DELETE FROM dashboard_sessions WHERE user_id = $1', [user.id])).rowCount;
  }

  private async view(user: User, k: ApiKeyRecord): Promise<KeyView> {
    const spend = await this.opts.ledger.keySpend(user.accountId, k.id);
    return {
      id: k.id,
      name: k.name,
      displayHint: k.displayHint,
      createdAt: k.createdAt,
      state: k.revokedAt === undefined ? 'active' : 'revoked',
      ...(k.revokedAt === undefined ? {} : { revokedAt: k.revokedAt }),
      ...(k.lifetimeCap === undefined ? {} : { lifetimeCap: k.lifetimeCap }),
      ...(k.monthlyCap === undefined ? {} : { monthlyCap: k.monthlyCap }),
      ...(k.maxCostPerRequest === undefined ? {} : { maxCostPerRequest: k.maxCostPerRequest }),
      lifetimeSpent: spend.lifetimeSpent,
      monthSpent: spend.monthSpent,
      held: spend.lifetimeHeld,
      ...(k.rateLimits === undefined ? {} : { rateLimits: k.rateLimits }),
    };
  }

  /** What the account can spend now (the hot path), and what requests in flight hold of it. */
  balance(user: User): Promise<{ balance: number; held: number }> {
    return this.accounts.balance(user.accountId);
  }

  /** One page of the account's statement of record, newest entry first. */
  async statement(user: User, cursor: unknown, limit = 50): Promise<StatementPage> {
    if (cursor !== undefined && typeof cursor !== 'string') throw new DashboardError(400, 'cursor must be the next_cursor of a previous page.');
    try {
      return await statementPage(this.opts.db, { accountId: user.accountId, limit, ...(cursor === undefined || cursor === '' ? {} : { cursor }) });
    } catch (err) {
      if (err instanceof UsageQueryError) throw new DashboardError(400, err.message);
      throw err;
    }
  }

  async listKeys(user: User): Promise<KeyView[]> {
    const keys = await this.accounts.listKeys(user.accountId);
    keys.sort((a, b) => b.createdAt - a.createdAt);
    const used = await this.opts.db.query<{ key_id: string; last_ms: number }>(
      'SELECT key_id, (extract(epoch FROM max(finished_at)) * 1000)::bigint AS last_ms FROM usage_records WHERE account_id = $1 GROUP BY key_id',
      [user.accountId],
    );
    const last = new Map(used.rows.map((r) => [r.key_id, Number(r.last_ms)]));
    return Promise.all(
      keys.map(async (k) => {
        const v = await this.view(user, k);
        const at = last.get(k.id);
        return at === undefined ? v : { ...v, lastUsedAt: at };
      }),
    );
  }

  /** The key if it belongs to the user's account; otherwise the same 404 as a key that does not exist. */
  async getKey(user: User, keyId: string): Promise<KeyView> {
    const k = await this.accounts.getKey(user.accountId, keyId);
    if (k === undefined || k.accountId !== user.accountId) throw new DashboardError(404, 'No such key in your account.');
    return this.view(user, k);
  }

  async createKey(user: User, name: unknown, caps: KeyCaps & KeyRequestCeiling, rateLimits: RateLimits = {}): Promise<{ key: KeyView; secret: string }> {
    DashboardService.requireConfirmed(user);
    const keyName = typeof name === 'string' && name.trim() !== '' ? name.trim() : 'unnamed';
    if (keyName.length > 100) throw new DashboardError(400, 'A key name has at most 100 characters.');
    const created = await this.accounts.createKey(user.accountId, { name: keyName, ...caps, rateLimits });
    return { key: await this.view(user, created.record), secret: created.secret };
  }

  /** Changes only the caps, cost ceiling and rate limits `change` names (null clears one); the rest stay as they are. */
  async updateKey(user: User, keyId: string, change: KeyChange): Promise<KeyView> {
    await this.getKey(user, keyId);
    if (!(await this.accounts.updateKey(user.accountId, keyId, change))) throw new DashboardError(404, 'No such key in your account.');
    return this.getKey(user, keyId);
  }

  /** The account's default rate limits for keys that set none of their own. */
  async accountRateLimits(user: User): Promise<RateLimits> {
    return (await this.accounts.getAccount(user.accountId))?.rateLimits ?? {};
  }

  async setAccountRateLimits(user: User, limits: RateLimits): Promise<RateLimits> {
    await this.accounts.setAccountRateLimits(user.accountId, limits);
    return this.accountRateLimits(user);
  }

  async revokeKey(user: User, keyId: string): Promise<KeyView> {
    await this.getKey(user, keyId);
    await this.accounts.revokeKey(user.accountId, keyId);
    return this.getKey(user, keyId);
  }
}

/** "12.50" -> 12500000 micro-USD exactly; "" or undefined -> no cap. */
export function capFromUsd(value: unknown, field: string): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const micros = typeof value === 'string' ? usdTextToMicros(value.trim()) : 'malformed';
  if (micros === 'malformed') throw new DashboardError(400, `${field} must be an amount in USD like 12.50 (at most 6 decimals), or empty for no cap.`);
  if (micros === 'too_large') throw new DashboardError(400, `${field} is too large.`);
  return micros;
}

export function capsFromInput(body: Record<string, unknown>): KeyCaps {
  const lifetimeCap = capFromUsd(body.lifetime_cap_usd, 'lifetime_cap_usd');
  const monthlyCap = capFromUsd(body.monthly_cap_usd, 'monthly_cap_usd');
  return { ...(lifetimeCap === undefined ? {} : { lifetimeCap }), ...(monthlyCap === undefined ? {} : { monthlyCap }) };
}

/** The form and JSON field of a key's default cost ceiling per request, in decimal USD. */
export const MAX_COST_INPUT = 'max_cost_per_request_usd';

/** The key's default cost ceiling per request from a form or JSON body: "0.05" USD, or empty / null / absent for none. */
export function maxCostFromInput(body: Record<string, unknown>): KeyRequestCeiling {
  const maxCostPerRequest = capFromUsd(body[MAX_COST_INPUT], MAX_COST_INPUT);
  return maxCostPerRequest === undefined ? {} : { maxCostPerRequest };
}

/** The decimal-USD fields of a form or JSON body, and the key's amount each sets. */
const AMOUNT_INPUTS = [
  ['lifetime_cap_usd', 'lifetimeCap'],
  ['monthly_cap_usd', 'monthlyCap'],
  [MAX_COST_INPUT, 'maxCostPerRequest'],
] as const;

/**
 * A partial change of a key from a form or JSON body: only the fields present change; an empty string
 * or null clears one (no cap or ceiling, or the account's default limit), a value sets it.
 */
export function keyChangeFromInput(body: Record<string, unknown>): KeyChange {
  const change: KeyChange = {};
  const given = (field: string): boolean => Object.hasOwn(body, field);
  const cleared = (field: string): boolean => body[field] === null || body[field] === '';
  for (const [field, amount] of AMOUNT_INPUTS) {
    if (given(field)) change[amount] = cleared(field) ? null : (capFromUsd(body[field], field) ?? null);
  }
  const limits = rateLimitsFromInput(body);
  for (const [field, limit] of RATE_LIMIT_INPUTS) {
    if (given(field)) change[limit] = cleared(field) ? null : (limits[limit] ?? null);
  }
  return change;
}

/** The rate-limit fields of a form or JSON body, and the limit each sets. */
export const RATE_LIMIT_INPUTS = [
  ['requests_per_minute', 'requestsPerMinute'],
  ['tokens_per_minute', 'tokensPerMinute'],
  ['concurrent_requests', 'concurrentRequests'],
] as const;

/** Rate limits from a form (text) or JSON (numbers): a whole number from 1, or empty / null for none. */
export function rateLimitsFromInput(body: Record<string, unknown>): RateLimits {
  const out: RateLimits = {};
  for (const [field, limit] of RATE_LIMIT_INPUTS) {
    const v = body[field];
    if (v === undefined || v === null || v === '') continue;
    const n = typeof v === 'number' ? v : typeof v === 'string' && /^\s*\d{1,13}\s*$/.test(v) ? Number(v) : NaN;
    if (!Number.isSafeInteger(n) || n < 1 || n > MAX_RATE_LIMIT) throw new DashboardError(400, `${field} must be a whole number from 1 to ${MAX_RATE_LIMIT}, or empty for no limit.`);
    out[limit] = n;
  }
  return out;
}
