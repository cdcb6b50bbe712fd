// Who is signing in: sign-up (a personal account of their own, owned by them), sign-in (with the second
// factor when it is on), the address confirmed through a mailed link, and the password reset. Sessions
// are sessions.ts's; the second factor's settings two-factor-settings.ts's; operators' provisioning
// provisioning.ts's. Attempts are throttled before any argon2 work (throttle.ts).
import { randomBytes } from 'node:crypto';
import { hash, verify } from '@node-rs/argon2';
import type { AccountService } from '../account-service/account-service.js';
import type { Database, Queryable } from '../record/database.js';
import { DashboardError } from './errors.js';
import { enqueueEmail } from './outbox.js';
import { sha256, type Session, type Sessions } from './sessions.js';
import { recordAccessEvent, recordSignIn, type SignInEvents, type SignInFailure } from './sign-in-events.js';
import { defaultThrottles, THROTTLED_MESSAGE, type AttemptThrottle, type Throttles } from './throttle.js';
import { consumeSecondFactor, secondFactorGiven } from './two-factor.js';
import { checkPassword, findUser, insertUser, MAX_PASSWORD, normalizeEmail, userOf, type User, type UserRow } from './users.js';

/** The second factor a form asks for, in words (sign-in, reset, turning it off). */
export const SECOND_FACTOR_NEEDED = 'Enter the 6-digit code from your authenticator app, or one of your recovery codes.';
export const SECOND_FACTOR_WRONG = 'Wrong or already used code: enter the current code from your authenticator app, or an unused recovery code.';

const VERIFY_HOURS = 48;

/** What a password reset link leads to: expired, or valid (and whether the user must give a second factor). */
export interface ResetTokenState {
  valid: boolean;
  secondFactor: boolean;
}

export interface IdentityOptions {
  db: Database;
  /** Sign-up opens the new user's personal account through it. */
  accounts: AccountService;
  signUp: boolean;
  sessions: Sessions;
  /** Attempt budgets of sign-in, sign-up and password reset (defaults: throttle.ts). */
  throttles?: Partial<Throttles>;
  /** Why an address may not use a password (its domain signs in only through SSO), else undefined. */
  passwordRefusal?: (email: string) => string | undefined;
  /** Where each sign-in's outcome goes (sign-in-events.ts). */
  events?: SignInEvents;
}

export class Identity {
  readonly throttles: Throttles;
  // Verified against when the e-mail is unknown, so a miss costs as long as a wrong password.
  private readonly decoy: Promise<string>;

  constructor(private readonly opts: IdentityOptions) {
    this.throttles = defaultThrottles(opts.throttles);
    this.decoy = hash(randomBytes(16).toString('hex'));
  }

  get signUpOpen(): boolean {
    return this.opts.signUp;
  }

  get sessions(): Sessions {
    return this.opts.sessions;
  }

  /** Takes one attempt from a budget before any costly work, or refuses with the one throttled answer. */
  static attempt(throttle: AttemptThrottle, subject: string, address: string): void {
    const wait = throttle.take(subject, address);
    if (wait > 0) throw new DashboardError(429, THROTTLED_MESSAGE(wait), wait);
  }

  /** Refuses a password for an address whose domain signs in only through SSO (sign-in, sign-up, reset). */
  private refusePassword(email: string): void {
    const refusal = this.opts.passwordRefusal?.(email);
    if (refusal !== undefined) throw new DashboardError(403, refusal);
  }

  /** Keys and top-ups need a confirmed address. */
  static requireConfirmed(user: User): void {
    if (!user.emailVerified) {
      throw new DashboardError(403, `Confirm your e-mail address first: open the link we mailed to ${user.email} (the Keys page can send it again).`);
    }
  }

  /**
   * Opens a personal account owned by the new user. Its address is not confirmed yet: a link is mailed
   * (through the outbox), and keys and top-ups wait until it is followed. `invited`: the caller checked
   * an invitation mailed to this very address, which proves it (no link is mailed) and opens sign-up
   * even where it is closed.
   */
  async signUp(emailIn: unknown, passwordIn: unknown, address: string, linkBase: string, opts: { invited?: boolean } = {}): Promise<{ user: User; sessionId: string; session: Session }> {
    if (!this.opts.signUp && opts.invited !== true) throw new DashboardError(403, 'Sign-up is closed on this Tollgate; ask the operator for an account.');
    const email = normalizeEmail(emailIn);
    this.refusePassword(email);
    const password = checkPassword(passwordIn);
    Identity.attempt(this.throttles.signUp, email, address);
    if ((await findUser(this.opts.db, email)) !== undefined) throw new DashboardError(409, 'An account with this e-mail already exists; sign in instead.');
    const passwordHash = await hash(password); // @node-rs/argon2 defaults to argon2id
    const account = await this.opts.accounts.createAccount(email);
    // Two sign-ups racing on one e-mail: the unique index decides; the loser's empty account stays unused.
    const user = await this.opts.db.transaction(async (tx) => {
      const created = await insertUser(tx, { email, passwordHash, role: 'holder', accountId: account.id, confirmed: opts.invited === true });
      if (created !== undefined && !created.emailVerified) await this.mailConfirmation(tx, created, linkBase);
      return created;
    });
    if (user === undefined) throw new DashboardError(409, 'An account with this e-mail already exists; sign in instead.');
    const { sessionId, session } = await this.opts.sessions.open(user, false);
    return { user, sessionId, session };
  }

  /** A password sign-in; its outcome, either way, is a sign-in event. */
  async signIn(emailIn: unknown, password: unknown, address: string, previousSessionId?: string, codeIn?: unknown): Promise<{ sessionId: string; session: Session }> {
    const email = typeof emailIn === 'string' ? emailIn.trim().toLowerCase() : '';
    const event = { method: 'password' as const, address, ...(email === '' ? {} : { email }) };
    try {
      const opened = await this.passwordSignIn(email, password, address, previousSessionId, codeIn);
      this.opts.events?.({ outcome: 'success', ...event, userId: opened.session.user.id });
      return opened;
    } catch (err) {
      this.opts.events?.({ outcome: 'failure', ...event, reason: err instanceof Error ? err.message : String(err) });
      throw err;
    }
  }

  private async passwordSignIn(email: string, password: unknown, address: string, previousSessionId: string | undefined, codeIn: unknown): Promise<{ sessionId: string; session: Session }> {
    // Counted before argon2 runs: guesses sent at once each take their own attempt. Before the SSO-only
    // refusal too, whose entry in the audit log a flood of attempts must not multiply.
    Identity.attempt(this.throttles.signIn, email, address);
    const row = email === '' ? undefined : await findUser(this.opts.db, email);
    const ssoOnly = email === '' ? undefined : this.opts.passwordRefusal?.(email);
    if (ssoOnly !== undefined) {
      // A password for an address of an SSO-only domain: on record, without the password.
      await recordSignIn(this.opts.db, { succeeded: false, method: 'password', reason: 'sso_only', ...(row === undefined ? {} : { user: { id: row.id, email: row.email, accountId: row.account_id } }) });
      throw new DashboardError(403, ssoOnly);
    }
    const pw = typeof password === 'string' && password.length <= MAX_PASSWORD ? password : '';
    const ok = await verify(row?.password_hash ?? (await this.decoy), pw);
    const tried = row === undefined ? undefined : { id: row.id, email: row.email, accountId: row.account_id };
    const refuse = async (reason: SignInFailure, message: string, secondFactor?: 'totp' | 'recovery_code'): Promise<never> => {
      await recordSignIn(this.opts.db, { succeeded: false, method: 'password', reason, ...(tried === undefined ? {} : { user: tried }), ...(secondFactor === undefined ? {} : { secondFactor }) });
      throw new DashboardError(401, message);
    };
    if (row === undefined || tried === undefined) return refuse('unknown_address', 'Wrong e-mail or password.');
    if (!ok) return refuse('wrong_password', 'Wrong e-mail or password.');
    let secondFactor: 'totp' | 'recovery_code' | undefined;
    if (row.totp_enabled_at !== null && row.totp_secret !== null) {
      if (secondFactorGiven(codeIn) === undefined) return refuse('second_factor_missing', `Two-factor sign-in is on. ${SECOND_FACTOR_NEEDED}`);
      const used = await consumeSecondFactor(this.opts.db, { id: row.id, totpSecret: row.totp_secret }, codeIn);
      if (used === undefined) return refuse('second_factor_wrong', SECOND_FACTOR_WRONG);
      secondFactor = used === 'recovery' ? 'recovery_code' : 'totp';
    }
    this.throttles.signIn.succeed(email, address);
    // Rotation: whatever session the browser brought is ended, and a new id is issued.
    if (previousSessionId !== undefined) await this.opts.sessions.signOut(previousSessionId);
    const opened = await this.opts.sessions.open(userOf(row), secondFactor !== undefined);
    await recordSignIn(this.opts.db, { succeeded: true, method: 'password', user: tried, ...(secondFactor === undefined ? {} : { secondFactor }) });
    return opened;
  }

  /** Ends this session of the user (their sign-out), on record. */
  async signOut(sessionId: string, user: User): Promise<void> {
    await this.opts.db.transaction(async (tx) => {
      await tx.query('DELETE FROM dashboard_sessions WHERE id_hash = $1', [sha256(sessionId)]);
      await recordAccessEvent(tx, 'sign_out', user);
    });
  }

  /** Ends every session of the user, on record; how many ended. */
  async signOutEverywhere(user: User): Promise<number> {
    return this.opts.db.transaction(async (tx) => {
      const ended = (await tx.query('DELETE FROM dashboard_sessions WHERE user_id = $1', [user.id])).rowCount;
      await recordAccessEvent(tx, 'sign_out.everywhere', user, { sessions_ended: ended });
      return ended;
    });
  }

  /**
   * The signed-in user's own password again, before a change of the second factor (a session left open
   * is not enough to change it). Counted against the sign-in budget, as a sign-in is.
   */
  async confirmPassword(user: User, password: unknown, address: string): Promise<UserRow> {
    Identity.attempt(this.throttles.signIn, user.email, address);
    const row = await findUser(this.opts.db, user.email);
    const pw = typeof password === 'string' && password.length <= MAX_PASSWORD ? password : '';
    if (row === undefined || !(await verify(row.password_hash, pw))) throw new DashboardError(403, 'Wrong password: enter the password you sign in with.');
    this.throttles.signIn.succeed(user.email, address);
    return row;
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
    Identity.attempt(this.throttles.resetRequest, `verify:${user.id}`, address);
    await this.opts.db.transaction(async (tx) => {
      await this.mailConfirmation(tx, user, linkBase);
      await recordAccessEvent(tx, 'email_confirmation.resent', user);
    });
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

  /**
   * Starts a password reset: for a known address, a single-use token (stored hashed, valid an hour) is
   * mailed as a link under `linkBase`. The answer is the same whether the address is known or not.
   */
  async requestPasswordReset(emailIn: unknown, linkBase: string, address: string): Promise<void> {
    const email = normalizeEmail(emailIn);
    this.refusePassword(email);
    Identity.attempt(this.throttles.resetRequest, email, address);
    const user = await findUser(this.opts.db, email);
    // Asked for an address with no account: on record too (without the address typed), so a run of them shows.
    if (user === undefined) return recordAccessEvent(this.opts.db, 'password_reset.requested', undefined, { known_address: false });
    const token = randomBytes(32).toString('base64url');
    await this.opts.db.transaction(async (tx) => {
      await recordAccessEvent(tx, 'password_reset.requested', { id: user.id, email: user.email, accountId: user.account_id }, { known_address: true });
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
    checkPassword(password);
    Identity.attempt(this.throttles.resetSubmit, sha256(token), address);
    const passwordHash = await hash(password as string);
    await this.opts.db.transaction(async (tx) => {
      const used = await tx.query<{ user_id: string }>('DELETE FROM password_resets WHERE token_hash = $1 AND expires_at > now() RETURNING user_id', [sha256(token)]);
      const userId = used.rows[0]?.user_id;
      if (userId === undefined) throw new DashboardError(400, 'This reset link has expired or was used already; ask for a new one.');
      const user = (await tx.query<{ email: string; totp_secret: string | null; totp_enabled_at: Date | null }>('SELECT email, totp_secret, totp_enabled_at FROM dashboard_users WHERE id = $1 FOR UPDATE', [userId])).rows[0];
      // A link mailed before the domain went SSO-only: the refusal rolls back, so it stays unused.
      if (user !== undefined) this.refusePassword(user.email);
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
    for (const table of ['dashboard_sessions', 'password_resets', 'email_verifications', 'key_reveals', 'sso_logins']) {
      n += (await this.opts.db.query(`DELETE FROM ${table} WHERE expires_at <= now()`)).rowCount;
    }
    return n;
  }
}
