// The dashboard's one service layer: pages and the JSON API both call it, so a rule (ownership, caps,
// secrets shown once) is written once. Every key operation is scoped to the signed-in user's account.
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { hash, verify } from '@node-rs/argon2';
import type { AccountStore, ApiKeyRecord, KeyCaps } from '../accounts/account-store.js';
import type { Ledger } from '../billing/ledger.js';
import type { Database } from '../record/database.js';
import { statementPage, type StatementPage } from '../record/statement.js';
import { UsageQueryError } from '../record/usage-query.js';
import { SignInThrottle } from './throttle.js';
import { enqueueEmail } from './outbox.js';

export type Role = 'holder' | 'admin';

export interface User {
  id: string;
  email: string;
  role: Role;
  accountId: string;
}

export interface Session {
  user: User;
  csrfToken: string;
  expiresAt: Date;
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
  lifetimeSpent: number;
  monthSpent: number;
  held: number;
  /** Unix ms of the key's last request of record. */
  lastUsedAt?: number;
}

/** An error the caller may see: status plus an actionable message. */
export class DashboardError extends Error {
  constructor(readonly status: number, message: string, readonly retryAfterSeconds?: number) {
    super(message);
  }
}

export interface DashboardServiceOptions {
  db: Database;
  accounts: AccountStore;
  ledger: Ledger;
  signUp: boolean;
  sessionTtlMs: number;
  throttle?: SignInThrottle;
  /** Called after a key is revoked so an in-process gateway drops cached lookups at once. */
  onRevoke?: () => void;
}

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,190}\.[^\s@]{1,60}$/;
const MIN_PASSWORD = 10;
const MAX_PASSWORD = 1024;

const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

export class DashboardService {
  private readonly throttle: SignInThrottle;
  // Verified against when the e-mail is unknown, so a miss costs as long as a wrong password.
  private readonly decoy: Promise<string>;

  constructor(private readonly opts: DashboardServiceOptions) {
    this.throttle = opts.throttle ?? new SignInThrottle();
    this.decoy = hash(randomBytes(16).toString('hex'));
  }

  get signUpOpen(): boolean {
    return this.opts.signUp;
  }

  /** The parts the other page modules (usage, refunds, admin) read through. */
  get db(): Database {
    return this.opts.db;
  }

  get backend(): { accounts: AccountStore; ledger: Ledger } {
    return { accounts: this.opts.accounts, ledger: this.opts.ledger };
  }

  /**
   * Starts a password reset: for a known address, a single-use token (stored hashed, valid an hour) is
   * mailed as a link under `linkBase`. The answer is the same whether the address is known or not.
   */
  async requestPasswordReset(emailIn: unknown, linkBase: string): Promise<void> {
    const email = DashboardService.normalizeEmail(emailIn);
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

  /** Whether a reset token is valid now (for the page that asks for the new password). */
  async resetTokenValid(token: string): Promise<boolean> {
    const r = await this.opts.db.query('SELECT 1 FROM password_resets WHERE token_hash = $1 AND expires_at > now()', [sha256(token)]);
    return r.rows.length === 1;
  }

  /** Sets the new password once per token, and ends every session of the user. */
  async resetPassword(token: string, password: unknown): Promise<void> {
    if (typeof password !== 'string' || password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) {
      throw new DashboardError(400, `Choose a password of ${MIN_PASSWORD} to ${MAX_PASSWORD} characters.`);
    }
    const passwordHash = await hash(password);
    await this.opts.db.transaction(async (tx) => {
      const used = await tx.query<{ user_id: string }>('DELETE FROM password_resets WHERE token_hash = $1 AND expires_at > now() RETURNING user_id', [sha256(token)]);
      const userId = used.rows[0]?.user_id;
      if (userId === undefined) throw new DashboardError(400, 'This reset link has expired or was used already; ask for a new one.');
      await tx.query('UPDATE dashboard_users SET password_hash = $2 WHERE id = $1', [userId, passwordHash]);
      await tx.query('DELETE FROM dashboard_sessions WHERE user_id = $1', [userId]);
      await tx.query('DELETE FROM password_resets WHERE user_id = $1', [userId]);
    });
  }

  /** Removes expired sessions and reset tokens (a periodic job). */
  async purgeExpired(): Promise<number> {
    const s = await this.opts.db.query('DELETE FROM dashboard_sessions WHERE expires_at <= now()');
    const r = await this.opts.db.query('DELETE FROM password_resets WHERE expires_at <= now()');
    return s.rowCount + r.rowCount;
  }

  /** After a key is revoked elsewhere (the admin pages): an in-process gateway forgets cached lookups. */
  keyRevoked(): void {
    this.opts.onRevoke?.();
  }

  private static normalizeEmail(email: unknown): string {
    if (typeof email !== 'string' || !EMAIL.test(email.trim())) throw new DashboardError(400, 'Enter a valid e-mail address.');
    return email.trim().toLowerCase();
  }

  async signUp(emailIn: unknown, password: unknown): Promise<{ user: User; sessionId: string; session: Session }> {
    if (!this.opts.signUp) throw new DashboardError(403, 'Sign-up is closed on this Tollgate; ask the operator for an account.');
    const email = DashboardService.normalizeEmail(emailIn);
    if (typeof password !== 'string' || password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) {
      throw new DashboardError(400, `Choose a password of ${MIN_PASSWORD} to ${MAX_PASSWORD} characters.`);
    }
    const existing = await this.opts.db.query('SELECT 1 FROM dashboard_users WHERE email = $1', [email]);
    if (existing.rows.length > 0) throw new DashboardError(409, 'An account with this e-mail already exists; sign in instead.');
    const passwordHash = await hash(password); // @node-rs/argon2 defaults to argon2id
    const account = await this.opts.accounts.createAccount(email);
    const user: User = { id: `usr_${randomUUID()}`, email, role: 'holder', accountId: account.id };
    try {
      await this.opts.db.query('INSERT INTO dashboard_users (id, email, password_hash, role, account_id) VALUES ($1, $2, $3, $4, $5)', [
        user.id,
        email,
        passwordHash,
        user.role,
        user.accountId,
      ]);
    } catch (err) {
      // Two sign-ups racing on one e-mail: the unique index decides; the loser's empty account stays unused.
      if ((err as { code?: string }).code === '23505') throw new DashboardError(409, 'An account with this e-mail already exists; sign in instead.');
      throw err;
    }
    const { sessionId, session } = await this.openSession(user);
    return { user, sessionId, session };
  }

  /**
   * Creates the user of an existing account, or sets the password of the one with this e-mail (the local
   * run's demo sign-in, and operators provisioning a holder while sign-up is closed).
   */
  async upsertUser(emailIn: string, password: string, accountId: string, role: Role = 'holder'): Promise<User> {
    const email = DashboardService.normalizeEmail(emailIn);
    if (password.length < MIN_PASSWORD || password.length > MAX_PASSWORD) throw new DashboardError(400, `A password has ${MIN_PASSWORD} to ${MAX_PASSWORD} characters.`);
    if ((await this.opts.accounts.getAccount(accountId)) === undefined) throw new DashboardError(404, `No account ${accountId}.`);
    const row = (
      await this.opts.db.query<{ id: string }>(
        `INSERT INTO dashboard_users (id, email, password_hash, role, account_id) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (email) DO UPDATE SET password_hash = EXCLUDED.password_hash, role = EXCLUDED.role, account_id = EXCLUDED.account_id
         RETURNING id`,
        [`usr_${randomUUID()}`, email, await hash(password), role, accountId],
      )
    ).rows[0];
    if (row === undefined) throw new Error('upsert returned no row');
    return { id: row.id, email, role, accountId };
  }

  async signIn(emailIn: unknown, password: unknown, address: string, previousSessionId?: string): Promise<{ sessionId: string; session: Session }> {
    const email = typeof emailIn === 'string' ? emailIn.trim().toLowerCase() : '';
    const wait = this.throttle.retryAfter(email, address);
    if (wait > 0) throw new DashboardError(429, `Too many failed sign-ins; try again in ${wait} seconds.`, wait);
    const row = (
      await this.opts.db.query<{ id: string; email: string; password_hash: string; role: Role; account_id: string }>(
        'SELECT id, email, password_hash, role, account_id FROM dashboard_users WHERE email = $1',
        [email],
      )
    ).rows[0];
    const pw = typeof password === 'string' && password.length <= MAX_PASSWORD ? password : '';
    const ok = await verify(row?.password_hash ?? (await this.decoy), pw);
    if (row === undefined || !ok) {
      this.throttle.fail(email, address);
      throw new DashboardError(401, 'Wrong e-mail or password.');
    }
    this.throttle.succeed(email);
    // Rotation: whatever session the browser brought is ended, and a new id is issued.
    if (previousSessionId !== undefined) await this.signOut(previousSessionId);
    return this.openSession({ id: row.id, email: row.email, role: row.role, accountId: row.account_id });
  }

  private async openSession(user: User): Promise<{ sessionId: string; session: Session }> {
    const sessionId = randomBytes(32).toString('base64url');
    const csrfToken = randomBytes(32).toString('base64url');
    const expiresAt = new Date(Date.now() + this.opts.sessionTtlMs);
    await this.opts.db.query('INSERT INTO dashboard_sessions (id_hash, user_id, csrf_token, expires_at) VALUES ($1, $2, $3, $4)', [
      sha256(sessionId),
      user.id,
      csrfToken,
      expiresAt,
    ]);
    return { sessionId, session: { user, csrfToken, expiresAt } };
  }

  /** The live session for a cookie value, or undefined (unknown or expired). */
  async session(sessionId: string): Promise<Session | undefined> {
    const r = await this.opts.db.query<{ csrf_token: string; expires_at: Date; id: string; email: string; role: Role; account_id: string }>(
      `UPDATE dashboard_sessions s SET last_seen_at = now() FROM dashboard_users u
        WHERE s.id_hash = $1 AND s.user_id = u.id AND s.expires_at > now()
        RETURNING s.csrf_token, s.expires_at, u.id, u.email, u.role, u.account_id`,
      [sha256(sessionId)],
    );
    const row = r.rows[0];
    if (row === undefined) return undefined;
    return { csrfToken: row.csrf_token, expiresAt: row.expires_at, user: { id: row.id, email: row.email, role: row.role, accountId: row.account_id } };
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
      lifetimeSpent: spend.lifetimeSpent,
      monthSpent: spend.monthSpent,
      held: spend.lifetimeHeld,
    };
  }

  /** What the account can spend now (the hot path), and what requests in flight hold of it. */
  balance(user: User): Promise<{ balance: number; held: number }> {
    return this.opts.ledger.balance(user.accountId);
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
    const keys = await this.opts.accounts.listKeys(user.accountId);
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
    const k = await this.opts.accounts.getKey(user.accountId, keyId);
    if (k === undefined || k.accountId !== user.accountId) throw new DashboardError(404, 'No such key in your account.');
    return this.view(user, k);
  }

  async createKey(user: User, name: unknown, caps: KeyCaps): Promise<{ key: KeyView; secret: string }> {
    const keyName = typeof name === 'string' && name.trim() !== '' ? name.trim() : 'unnamed';
    if (keyName.length > 100) throw new DashboardError(400, 'A key name has at most 100 characters.');
    const created = await this.opts.accounts.createKey(user.accountId, { name: keyName, ...caps });
    return { key: await this.view(user, created.record), secret: created.secret };
  }

  async setCaps(user: User, keyId: string, caps: KeyCaps): Promise<KeyView> {
    await this.getKey(user, keyId);
    if (!(await this.opts.accounts.setKeyCaps(user.accountId, keyId, caps))) throw new DashboardError(404, 'No such key in your account.');
    return this.getKey(user, keyId);
  }

  async revokeKey(user: User, keyId: string): Promise<KeyView> {
    await this.getKey(user, keyId);
    await this.opts.accounts.revokeKey(user.accountId, keyId);
    this.opts.onRevoke?.();
    return this.getKey(user, keyId);
  }
}

const USD = /^\d{1,10}(\.\d{1,6})?$/;

/** "12.50" -> 12500000 micro-USD exactly; "" or undefined -> no cap. */
export function capFromUsd(value: unknown, field: string): number | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string' || !USD.test(value.trim())) throw new DashboardError(400, `${field} must be an amount in USD like 12.50 (at most 6 decimals), or empty for no cap.`);
  const [whole = '0', fraction = ''] = value.trim().split('.');
  const micros = BigInt(whole) * 1_000_000n + BigInt(fraction.padEnd(6, '0'));
  if (micros > BigInt(Number.MAX_SAFE_INTEGER)) throw new DashboardError(400, `${field} is too large.`);
  return Number(micros);
}

export function capsFromInput(body: Record<string, unknown>): KeyCaps {
  const lifetimeCap = capFromUsd(body.lifetime_cap_usd, 'lifetime_cap_usd');
  const monthlyCap = capFromUsd(body.monthly_cap_usd, 'monthly_cap_usd');
  return { ...(lifetimeCap === undefined ? {} : { lifetimeCap }), ...(monthlyCap === undefined ? {} : { monthlyCap }) };
}
