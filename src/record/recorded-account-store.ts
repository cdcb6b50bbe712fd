// Accounts and keys with PostgreSQL as their record: every change commits there first, then the hot
// path (Redis or memory) takes the same record. A lookup the hot path misses (a flushed or new Redis,
// a restarted local run) is answered from PostgreSQL and seeds the hot path again, so a wipe loses no
// key and never brings a revoked key back. Only the SHA-256 hex of a secret is stored.
//
// Key state (revocation, caps) takes the durable path of money movements: each change bumps the key's
// version in the same UPDATE, then the hot path takes the copy, version-checked so an older copy never
// overwrites a newer one. A push that fails (Redis down or refusing writes after the COMMIT) is retried
// by this process at short intervals, and every process's key sweeper pushes any key whose hot_version
// is behind its version, so a revocation reaches the gateways however the first write went.
//
// The hot path holds every key's hash (the directory), loaded whole from the record after it lost its
// data, so a hash it does not know is refused without a query: a flood of made-up keys costs the record
// nothing but a few budgeted look-ups a second (LookupBudget), which find a key whose push is late.
import type { Account, AccountStore, ApiKeyRecord, CreatedKey, KeyCaps, KeyChange, KeyPointer, KeySetting, NewKeyOptions, RestorableAccountStore } from '../accounts/account-store.js';
import { generateApiKey, hashApiKey } from '../accounts/api-key.js';
import { newAccountId } from '../accounts/ids.js';
import { newKeyRecord } from '../accounts/key-record.js';
import { checkCaps, checkImportedSecret, checkKeyChange } from '../accounts/validation.js';
import { checkRateLimits, compactRateLimits, type RateLimitField, type RateLimits } from '../accounts/rate-limits.js';
import type { Database, SqlValue } from './database.js';
import { LookupBudget } from './lookup-budget.js';
import { RecordedTeams, SCOPES_BEHIND, type ScopeStateDifference } from './recorded-teams.js';
import { TeamChangeRefused, type HasTeams } from '../accounts/teams.js';

interface AccountRow {
  id: string;
  name: string;
  created_ms: number;
  default_rpm_limit: number | null;
  default_tpm_limit: number | null;
  default_concurrency_limit: number | null;
  limits_version: number;
}

interface KeyRow {
  id: string;
  account_id: string;
  secret_hash: string;
  display_prefix: string;
  last_four: string;
  name: string;
  lifetime_cap: number | null;
  monthly_cap: number | null;
  created_ms: number;
  revoked_ms: number | null;
  version: number;
  rpm_limit: number | null;
  tpm_limit: number | null;
  concurrency_limit: number | null;
  owner_user_id: string | null;
  max_cost_per_request: number | null;
  team_id: string | null;
}

const ACCOUNT_COLUMNS = `id, name, (extract(epoch FROM created_at) * 1000)::bigint AS created_ms,
  default_rpm_limit, default_tpm_limit, default_concurrency_limit, limits_version`;
const KEY_COLUMNS = `id, account_id, secret_hash, display_prefix, last_four, name, lifetime_cap, monthly_cap,
  (extract(epoch FROM created_at) * 1000)::bigint AS created_ms, (extract(epoch FROM revoked_at) * 1000)::bigint AS revoked_ms, version,
  rpm_limit, tpm_limit, concurrency_limit, owner_user_id, max_cost_per_request, team_id`;

/** Rate limits from three nullable columns. */
function limitsOf(rpm: number | null, tpm: number | null, concurrency: number | null): RateLimits | undefined {
  return compactRateLimits({
    ...(rpm === null ? {} : { requestsPerMinute: Number(rpm) }),
    ...(tpm === null ? {} : { tokensPerMinute: Number(tpm) }),
    ...(concurrency === null ? {} : { concurrentRequests: Number(concurrency) }),
  });
}

/** The display hint `sk-tg-AbCd…wxyz` as the table keeps it: prefix and last four. */
function splitHint(hint: string): { prefix: string; lastFour: string } {
  const at = hint.lastIndexOf('…');
  return at < 0 ? { prefix: hint, lastFour: '' } : { prefix: hint.slice(0, at), lastFour: hint.slice(at + 1) };
}

function toAccount(r: AccountRow): Account {
  const account: Account = { id: r.id, name: r.name, createdAt: Number(r.created_ms) };
  const limits = limitsOf(r.default_rpm_limit, r.default_tpm_limit, r.default_concurrency_limit);
  if (limits !== undefined) account.rateLimits = limits;
  return account;
}

/** Where each of a key's settings is kept. */
const KEY_SETTING_COLUMNS: Record<KeySetting, string> = {
  lifetimeCap: 'lifetime_cap',
  monthlyCap: 'monthly_cap',
  maxCostPerRequest: 'max_cost_per_request',
  requestsPerMinute: 'rpm_limit',
  tokensPerMinute: 'tpm_limit',
  concurrentRequests: 'concurrency_limit',
};

function toKey(r: KeyRow): ApiKeyRecord {
  const rec: ApiKeyRecord = {
    id: r.id,
    accountId: r.account_id,
    name: r.name,
    displayHint: `${r.display_prefix}…${r.last_four}`,
    createdAt: Number(r.created_ms),
  };
  if (r.lifetime_cap !== null) rec.lifetimeCap = Number(r.lifetime_cap);
  if (r.monthly_cap !== null) rec.monthlyCap = Number(r.monthly_cap);
  if (r.max_cost_per_request !== null) rec.maxCostPerRequest = Number(r.max_cost_per_request);
  if (r.revoked_ms !== null) rec.revokedAt = Number(r.revoked_ms);
  const limits = limitsOf(r.rpm_limit, r.tpm_limit, r.concurrency_limit);
  if (limits !== undefined) rec.rateLimits = limits;
  if (r.owner_user_id !== null) rec.ownerId = r.owner_user_id;
  if (r.team_id !== null) rec.teamId = r.team_id;
  return rec;
}

export interface RecordedAccountStoreOptions {
  db: Database;
  /** The hot path's store, written after each commit and seeded on a miss. */
  hot: RestorableAccountStore;
  keyMarker: string;
  now?: () => number;
  /** After an account is committed and in the hot path: loads its (empty) money there. */
  onAccountCreated?: (accountId: string) => Promise<void>;
  /**
   * How often keys whose last change the hot path may not have (hot_version < version) are pushed
   * again; 0 turns the sweeper off. Default 500 ms: half the default key-cache TTL, so a change another
   * process committed and could not push reaches Redis well within it.
   */
  keySweepMs?: number;
  /** A committed key change could not be pushed to the hot path; it is retried. */
  onKeyPending?: (err: unknown, accountId: string, keyId: string) => void;
  /**
   * Record look-ups per second (and burst) of key hashes the hot path's complete directory does not
   * know. Default 5; 0: none (a late key is then found only once its push lands).
   */
  unknownKeyLookupsPerSecond?: number;
  /** Each record query made for a key lookup, by why it was made (tests and metrics count them). */
  onKeyQuery?: (reason: KeyQueryReason) => void;
}

/** Why a key lookup asked the record: a pointer without its key, a budgeted unknown hash, a directory load. */
export type KeyQueryReason = 'dangling' | 'unknown' | 'directory';

/** Pointers one query of the directory load reads. */
const DIRECTORY_PAGE = 5_000;

/** A key as the record has it, with its version and secret hash: what the hot path is given. */
interface RecordedKey {
  record: ApiKeyRecord;
  hash: string;
  version: number;
}

/** Retries of a failed push: the first after this long, doubling to the cap. */
const KEY_RETRY_FIRST_MS = 50;
const KEY_RETRY_MAX_MS = 1_000;
/** Keys one sweep pushes at most. */
const KEY_SWEEP_BATCH = 500;

const KEYS_BEHIND = 'api_keys WHERE hot_version < version';
const ACCOUNTS_BEHIND = 'accounts WHERE limits_hot_version < limits_version';
/**
 * Whether anything is behind in the hot path: one boolean the sweeper reads twice a second, so an idle
 * gateway runs one small query per pass instead of four wide ones (their rows' descriptions were most of
 * what an idle gateway allocated, ~200 KB/s, which kept V8 from ever giving back its start's memory).
 */
const SWEEP_NEEDED = `SELECT ${[KEYS_BEHIND, ACCOUNTS_BEHIND, ...SCOPES_BEHIND]
  .map((rows) => `EXISTS (SELECT 1 FROM ${rows})`)
  .join(' OR ')} AS behind`;

/** A rate limit that differs: a key's own, or (keyId '') the account's default for keys. */
export type RateLimitDifference = 'key_rpm_limit' | 'key_tpm_limit' | 'key_concurrency_limit' | 'account_rpm_limit' | 'account_tpm_limit' | 'account_concurrency_limit';

const LIMIT_DIFFERENCES: ReadonlyArray<[RateLimitField, 'rpm' | 'tpm' | 'concurrency']> = [
  ['requestsPerMinute', 'rpm'],
  ['tokensPerMinute', 'tpm'],
  ['concurrentRequests', 'concurrency'],
];

/** A key's state as the hot path and the record each have it, where they differ (reconciliation). */
export interface KeyStateDifference {
  accountId: string;
  keyId: string;
  field: 'key_missing' | 'key_revoked' | 'key_lifetime_cap' | 'key_monthly_cap' | 'key_max_cost_per_request' | RateLimitDifference;
  /** The record's value: 1/0 for present or revoked, the cap or ceiling in micro-USD or the rate limit, -1 for none. */
  expected: number;
  /** The hot path's value, in the same terms. */
  actual: number;
}

export class RecordedAccountStore implements AccountStore, HasTeams {
  /** The account's teams and members' budgets, kept here beside its keys (and pushed the same way). */
  readonly teams: RecordedTeams;
  private readonly db: Database;
  private readonly hot: RestorableAccountStore;
  private readonly marker: string;
  private readonly now: () => number;
  private readonly onAccountCreated: ((accountId: string) => Promise<void>) | undefined;
  private readonly onKeyPending: ((err: unknown, accountId: string, keyId: string) => void) | undefined;
  /**
   * Committed changes the hot path has not taken yet, by key id: this process's lookups answer from
   * them (so its own gateway refuses a revoked key even while Redis refuses the write), and the retry
   * timer pushes them until Redis has them.
   */
  private readonly unpushed = new Map<string, RecordedKey>();
  private retryTimer: NodeJS.Timeout | undefined;
  private retryDelay = KEY_RETRY_FIRST_MS;
  private readonly sweepTimer: NodeJS.Timeout | undefined;
  private sweeping: Promise<number> | undefined;
  private closed = false;
  private readonly unknownKeyLookups: LookupBudget;
  private readonly onKeyQuery: ((reason: KeyQueryReason) => void) | undefined;
  private loadingDirectory: Promise<void> | undefined;

  constructor(opts: RecordedAccountStoreOptions) {
    this.db = opts.db;
    this.hot = opts.hot;
    this.marker = opts.keyMarker;
    this.now = opts.now ?? Date.now;
    this.onAccountCreated = opts.onAccountCreated;
    this.onKeyPending = opts.onKeyPending;
    this.unknownKeyLookups = new LookupBudget(opts.unknownKeyLookupsPerSecond ?? 5, this.now);
    this.onKeyQuery = opts.onKeyQuery;
    this.teams = new RecordedTeams({
      db: this.db,
      hot: this.hot,
      keys: { setKeyTeam: (a, k, t) => this.setKeyTeam(a, k, t), leaveTeam: (a, t) => this.leaveTeam(a, t) },
      ...(opts.onKeyPending === undefined ? {} : { onPending: opts.onKeyPending }),
    });
    const sweepMs = opts.keySweepMs ?? 500;
    if (sweepMs > 0) {
      this.sweepTimer = setInterval(() => void this.sweepKeys(), sweepMs);
      this.sweepTimer.unref();
    }
  }

  async createAccount(name: string): Promise<Account> {
    const account: Account = { id: newAccountId(), name, createdAt: this.now() };
    await this.db.query('INSERT INTO accounts (id, name, created_at) VALUES ($1, $2, to_timestamp($3::double precision / 1000))', [account.id, name, account.createdAt]);
    await this.hot.restoreAccount(account, 1);
    await this.onAccountCreated?.(account.id);
    return account;
  }

  private async recordedAccountRow(accountId: string): Promise<AccountRow | undefined> {
    const r = await this.db.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = $1`, [accountId]);
    return r.rows[0];
  }

  private async recordedAccount(accountId: string): Promise<Account | undefined> {
    const row = await this.recordedAccountRow(accountId);
    return row === undefined ? undefined : toAccount(row);
  }

  /** The account as the record has it, into the hot path with its limits' version; the account, if any. */
  private async reseedAccount(accountId: string): Promise<Account | undefined> {
    const row = await this.recordedAccountRow(accountId);
    if (row === undefined) return undefined;
    const account = toAccount(row);
    await this.hot.restoreAccount(account, Number(row.limits_version));
    return account;
  }

  async getAccount(accountId: string): Promise<Account | undefined> {
    const hot = await this.hot.getAccount(accountId);
    if (hot !== undefined) return hot;
    return this.reseedAccount(accountId);
  }

  async listAccounts(): Promise<Account[]> {
    const r = await this.db.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts ORDER BY created_at, id`);
    return r.rows.map(toAccount);
  }

  async createKey(accountId: string, opts: NewKeyOptions = {}): Promise<CreatedKey> {
    const secret = generateApiKey(this.marker);
    return { record: await this.storeKey(accountId, secret, opts), secret };
  }

  async importKey(accountId: string, secret: string, opts: NewKeyOptions = {}): Promise<ApiKeyRecord> {
    checkImportedSecret(secret, this.marker);
    const existing = await this.findKeyByHash(hashApiKey(secret));
    if (existing !== undefined) {
      if (existing.accountId !== accountId) throw new Error('The imported API key already belongs to another account.');
      return existing;
    }
    return this.storeKey(accountId, secret, opts);
  }

  private async storeKey(accountId: string, secret: string, opts: NewKeyOptions): Promise<ApiKeyRecord> {
    const record = newKeyRecord(accountId, secret, opts, this.now());
    const row = await this.recordedAccountRow(accountId);
    if (row === undefined) throw new Error(`unknown account ${accountId}`);
    if (record.teamId !== undefined && (await this.teams.getTeam(accountId, record.teamId)) === undefined) {
      throw new TeamChangeRefused('no_team', 'The account has no such team.');
    }
    const hash = hashApiKey(secret);
    const { prefix, lastFour } = splitHint(record.displayHint);
    const limits = record.rateLimits;
    const inserted = await this.db.query(
      `INSERT INTO api_keys (id, account_id, secret_hash, display_prefix, last_four, name, lifetime_cap, monthly_cap, created_at,
         rpm_limit, tpm_limit, concurrency_limit, owner_user_id, max_cost_per_request, team_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, to_timestamp($9::double precision / 1000), $10, $11, $12, $13, $14, $15)
       ON CONFLICT (secret_hash) DO NOTHING`,
      [
        record.id, accountId, hash, prefix, lastFour, record.name, record.lifetimeCap ?? null, record.monthlyCap ?? null, record.createdAt,
        limits?.requestsPerMinute ?? null, limits?.tokensPerMinute ?? null, limits?.concurrentRequests ?? null,
        record.ownerId ?? null, record.maxCostPerRequest ?? null, record.teamId ?? null,
      ],
    );
    // Only an import racing another import of the same secret gets here.
    if (inserted.rowCount === 0) throw new Error('The API key is already registered.');
    await this.hot.restoreAccount(toAccount(row), Number(row.limits_version));
    await this.hot.restoreKey(record, hash, 1);
    return record;
  }

  private async recordedKey(where: string, params: readonly SqlValue[]): Promise<RecordedKey | undefined> {
    const r = await this.db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE ${where}`, params);
    const row = r.rows[0];
    return row === undefined ? undefined : { record: toKey(row), hash: row.secret_hash, version: Number(row.version) };
  }

  /** Seeds the hot path with a key (and its account) read from the record. */
  private async reseed(found: RecordedKey): Promise<ApiKeyRecord> {
    await this.reseedAccount(found.record.accountId);
    await this.hot.restoreKey(found.record, found.hash, found.version);
    return found.record;
  }

  /** A key the hot path lost, with its account's teams and members' budgets (a memory hot path restarted has none). */
  private async reseedWithScopes(found: RecordedKey): Promise<ApiKeyRecord> {
    const record = await this.reseed(found);
    await this.teams.restore(found.record.accountId);
    return record;
  }

  /** A committed change this process has not pushed yet is newer than any copy the hot path answers with. */
  private newest(record: ApiKeyRecord | undefined): ApiKeyRecord | undefined {
    if (record === undefined || this.unpushed.size === 0) return record;
    return this.unpushed.get(record.id)?.record ?? record;
  }

  async findKeyByHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    let hot = await this.hot.lookupKey(secretHash);
    if (hot.kind === 'absent' && !hot.directoryComplete) {
      // The hot path lost its data (or never had the directory): load every key's hash once, then ask again.
      await this.loadKeyDirectory();
      hot = await this.hot.lookupKey(secretHash);
    }
    switch (hot.kind) {
      case 'found':
        return this.newest(hot.record);
      case 'dangling': {
        // A live key whose account's data is gone from the hot path: read it, its account and the
        // budgets on its requests' paths back.
        this.onKeyQuery?.('dangling');
        const found = await this.recordedKey('account_id = $1 AND id = $2', [hot.accountId, hot.keyId]);
        return found === undefined ? undefined : this.reseedWithScopes(found);
      }
      case 'absent': {
        if (!this.unknownKeyLookups.take()) return undefined;
        this.onKeyQuery?.('unknown');
        const found = await this.recordedKey('secret_hash = $1', [secretHash]);
        return found === undefined ? undefined : this.reseedWithScopes(found);
      }
    }
  }

  /**
   * Loads the directory of key hashes (every key's hash and owner, revoked ones too so they are refused
   * as revoked) from the record into the hot path, a page at a time, then marks it complete. One load at
   * a time per process; gateways loading at once write the same pointers.
   */
  private loadKeyDirectory(): Promise<void> {
    this.loadingDirectory ??= (async () => {
      const token = await this.hot.beginKeyDirectoryLoad();
      let after = '';
      for (;;) {
        this.onKeyQuery?.('directory');
        const page = await this.db.query<{ id: string; account_id: string; secret_hash: string }>(
          'SELECT id, account_id, secret_hash FROM api_keys WHERE id > $1 ORDER BY id LIMIT $2',
          [after, DIRECTORY_PAGE],
        );
        const pointers: KeyPointer[] = page.rows.map((r) => ({ secretHash: r.secret_hash, accountId: r.account_id, keyId: r.id }));
        await this.hot.restoreKeyPointers(pointers);
        if (page.rows.length < DIRECTORY_PAGE) break;
        after = page.rows[page.rows.length - 1]?.id ?? after;
      }
      await this.hot.completeKeyDirectoryLoad(token);
    })().finally(() => {
      this.loadingDirectory = undefined;
    });
    return this.loadingDirectory;
  }

  async getKey(accountId: string, keyId: string): Promise<ApiKeyRecord | undefined> {
    const hot = await this.hot.getKey(accountId, keyId);
    if (hot !== undefined) return this.newest(hot);
    const found = await this.recordedKey('account_id = $1 AND id = $2', [accountId, keyId]);
    return found === undefined ? undefined : this.reseed(found);
  }

  async listKeys(accountId: string): Promise<ApiKeyRecord[]> {
    const r = await this.db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE account_id = $1 ORDER BY created_at, id`, [accountId]);
    return r.rows.map(toKey);
  }

  async revokeKey(accountId: string, keyId: string): Promise<boolean> {
    // Revoking twice keeps the first revocation time (and still bumps the version: a push of it is news).
    return this.changeKey(
      'revoked_at = coalesce(revoked_at, to_timestamp($3::double precision / 1000))',
      [accountId, keyId, this.now()],
    );
  }

  async setKeyCaps(accountId: string, keyId: string, caps: KeyCaps): Promise<boolean> {
    checkCaps(caps);
    return this.changeKey('lifetime_cap = $3, monthly_cap = $4', [accountId, keyId, caps.lifetimeCap ?? null, caps.monthlyCap ?? null]);
  }

  /** One UPDATE of the columns the change names (the others are not written), with the key's version bumped. */
  async updateKey(accountId: string, keyId: string, change: KeyChange): Promise<boolean> {
    checkKeyChange(change);
    const named = (Object.keys(KEY_SETTING_COLUMNS) as KeySetting[]).filter((s) => change[s] !== undefined);
    if (named.length === 0) return (await this.getKey(accountId, keyId)) !== undefined;
    return this.changeKey(named.map((s, i) => `${KEY_SETTING_COLUMNS[s]} = $${i + 3}`).join(', '), [accountId, keyId, ...named.map((s) => change[s] ?? null)]);
  }

  /** Puts the key in a live team of its account, or in none; false when the account has no such key (or team). */
  setKeyTeam(accountId: string, keyId: string, teamId: string | null): Promise<boolean> {
    return this.changeKey(
      'team_id = $3',
      [accountId, keyId, teamId],
      'AND ($3::text IS NULL OR EXISTS (SELECT 1 FROM teams t WHERE t.id = $3 AND t.account_id = $1 AND t.deleted_at IS NULL))',
    );
  }

  /** Every key of the team leaves it (the team is being deleted), each change pushed as any other. */
  async leaveTeam(accountId: string, teamId: string): Promise<void> {
    const r = await this.db.query<KeyRow>(
      `UPDATE api_keys SET team_id = NULL, version = version + 1 WHERE account_id = $1 AND team_id = $2 RETURNING ${KEY_COLUMNS}`,
      [accountId, teamId],
    );
    for (const row of r.rows) await this.push({ record: toKey(row), hash: row.secret_hash, version: Number(row.version) });
  }

  async setKeyRateLimits(accountId: string, keyId: string, limits: RateLimits): Promise<boolean> {
    checkRateLimits(limits);
    return this.changeKey('rpm_limit = $3, tpm_limit = $4, concurrency_limit = $5', [
      accountId,
      keyId,
      limits.requestsPerMinute ?? null,
      limits.tokensPerMinute ?? null,
      limits.concurrentRequests ?? null,
    ]);
  }

  /**
   * Commits the account's default limits with their version bumped, then pushes the account to the hot
   * path (version-checked). A push that fails is left to the sweepers (limits_hot_version is behind).
   */
  async setAccountRateLimits(accountId: string, limits: RateLimits): Promise<boolean> {
    checkRateLimits(limits);
    const r = await this.db.query<AccountRow>(
      `UPDATE accounts SET default_rpm_limit = $2, default_tpm_limit = $3, default_concurrency_limit = $4, limits_version = limits_version + 1
       WHERE id = $1 RETURNING ${ACCOUNT_COLUMNS}`,
      [accountId, limits.requestsPerMinute ?? null, limits.tokensPerMinute ?? null, limits.concurrentRequests ?? null],
    );
    const row = r.rows[0];
    if (row === undefined) return false;
    await this.pushAccount(row);
    return true;
  }

  /** The hot path takes the account's limits (version-checked); the record notes it. False when it failed. */
  private async pushAccount(row: AccountRow): Promise<boolean> {
    try {
      await this.hot.restoreAccount(toAccount(row), Number(row.limits_version));
      await this.db.query('UPDATE accounts SET limits_hot_version = GREATEST(limits_hot_version, $2) WHERE id = $1', [row.id, Number(row.limits_version)]);
      return true;
    } catch (err) {
      this.onKeyPending?.(err, row.id, '');
      return false;
    }
  }

  /**
   * Commits one change of a key with its version bumped, then pushes the committed row to the hot path.
   * The change is durable once committed: a push that fails is retried here and by every sweeper, so the
   * caller is told it happened (true) even when Redis did not take it at once.
   */
  private async changeKey(set: string, params: readonly SqlValue[], condition = ''): Promise<boolean> {
    const r = await this.db.query<KeyRow>(
      `UPDATE api_keys SET ${set}, version = version + 1 WHERE account_id = $1 AND id = $2 ${condition} RETURNING ${KEY_COLUMNS}`,
      params,
    );
    const row = r.rows[0];
    if (row === undefined) return false;
    await this.push({ record: toKey(row), hash: row.secret_hash, version: Number(row.version) });
    return true;
  }

  /**
   * The hot path takes a committed key (version-checked), then the record notes that it has it. On
   * failure the key is kept for the retry timer (and the sweepers find it by its hot_version). True when
   * the hot path has it now.
   */
  private async push(key: RecordedKey): Promise<boolean> {
    try {
      await this.reseed(key);
      await this.db.query('UPDATE api_keys SET hot_version = GREATEST(hot_version, $2) WHERE id = $1', [key.record.id, key.version]);
      const kept = this.unpushed.get(key.record.id);
      if (kept !== undefined && kept.version <= key.version) this.unpushed.delete(key.record.id);
      return true;
    } catch (err) {
      const kept = this.unpushed.get(key.record.id);
      if (kept === undefined || kept.version < key.version) this.unpushed.set(key.record.id, key);
      this.onKeyPending?.(err, key.record.accountId, key.record.id);
      this.scheduleRetry();
      return false;
    }
  }

  private scheduleRetry(): void {
    if (this.retryTimer !== undefined || this.closed) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.retryUnpushed();
    }, this.retryDelay);
    this.retryTimer.unref();
    this.retryDelay = Math.min(KEY_RETRY_MAX_MS, this.retryDelay * 2);
  }

  private async retryUnpushed(): Promise<void> {
    let failed = false;
    for (const key of [...this.unpushed.values()]) if (!(await this.push(key))) failed = true;
    if (!failed) this.retryDelay = KEY_RETRY_FIRST_MS;
  }

  /**
   * One pass of the key sweeper: every key whose newest change the hot path may lack (a process that
   * committed it and died, or whose pushes keep failing) is pushed from the record. Pushes are
   * version-checked, so a sweep racing the original push, or another sweeper, changes nothing twice.
   * Returns how many the hot path took.
   */
  sweepKeys(): Promise<number> {
    this.sweeping ??= (async () => {
      const needed = await this.db.query<{ behind: boolean }>(SWEEP_NEEDED);
      if (needed.rows[0]?.behind !== true) return 0;
      const r = await this.db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM ${KEYS_BEHIND} ORDER BY id LIMIT $1`, [KEY_SWEEP_BATCH]);
      let pushed = 0;
      for (const row of r.rows) if (await this.push({ record: toKey(row), hash: row.secret_hash, version: Number(row.version) })) pushed++;
      // Accounts' default rate limits take the same path.
      const a = await this.db.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM ${ACCOUNTS_BEHIND} ORDER BY id LIMIT $1`, [KEY_SWEEP_BATCH]);
      for (const row of a.rows) if (await this.pushAccount(row)) pushed++;
      // And teams' and members' budgets.
      pushed += await this.teams.sweep();
      return pushed;
    })()
      .catch(() => 0)
      .finally(() => {
        this.sweeping = undefined;
      });
    return this.sweeping;
  }

  /** Puts the account, every one of its keys, its teams and members' budgets, as the record has them, back into the hot path. */
  async restoreAccountKeys(accountId: string): Promise<void> {
    const account = await this.reseedAccount(accountId);
    if (account === undefined) return;
    const r = await this.db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE account_id = $1`, [accountId]);
    for (const row of r.rows) await this.hot.restoreKey(toKey(row), row.secret_hash, Number(row.version));
    await this.teams.restore(accountId);
  }

  /** Reconciliation's budget check of the account's teams and members (RecordedTeams.reconcile); repaired on the spot. */
  reconcileScopes(accountId: string): Promise<ScopeStateDifference[]> {
    return this.teams.reconcile(accountId);
  }

  /**
   * Reconciliation's key check: each of the account's keys as the hot path holds it against the record
   * (present, revoked, caps). Every key that differs is pushed from the record again (version-checked),
   * so the hot path is repaired; the differences found before the repair are returned.
   */
  async reconcileKeys(accountId: string): Promise<KeyStateDifference[]> {
    const r = await this.db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE account_id = $1 ORDER BY id`, [accountId]);
    const out: KeyStateDifference[] = [];
    // The account's default limits first: a key's repair pushes the account too, which would hide them.
    const accountRow = await this.recordedAccountRow(accountId);
    const hotAccount = accountRow === undefined ? undefined : await this.hot.getAccount(accountId);
    if (accountRow !== undefined && hotAccount !== undefined) {
      const rec = toAccount(accountRow);
      const found = LIMIT_DIFFERENCES.map(([limit, name]) => ({
        accountId,
        keyId: '',
        field: `account_${name}_limit` as const,
        expected: rec.rateLimits?.[limit] ?? -1,
        actual: hotAccount.rateLimits?.[limit] ?? -1,
      })).filter((d) => d.expected !== d.actual);
      if (found.length > 0) {
        out.push(...found);
        await this.pushAccount(accountRow);
      }
    }
    for (const row of r.rows) {
      const rec = toKey(row);
      const hot = await this.hot.getKey(accountId, rec.id);
      const found: KeyStateDifference[] = [];
      const differ = (field: KeyStateDifference['field'], expected: number, actual: number): void => {
        if (expected !== actual) found.push({ accountId, keyId: rec.id, field, expected, actual });
      };
      if (hot === undefined) differ('key_missing', 1, 0);
      else {
        differ('key_revoked', rec.revokedAt === undefined ? 0 : 1, hot.revokedAt === undefined ? 0 : 1);
        differ('key_lifetime_cap', rec.lifetimeCap ?? -1, hot.lifetimeCap ?? -1);
        differ('key_monthly_cap', rec.monthlyCap ?? -1, hot.monthlyCap ?? -1);
        differ('key_max_cost_per_request', rec.maxCostPerRequest ?? -1, hot.maxCostPerRequest ?? -1);
        for (const [limit, name] of LIMIT_DIFFERENCES) differ(`key_${name}_limit`, rec.rateLimits?.[limit] ?? -1, hot.rateLimits?.[limit] ?? -1);
      }
      if (found.length === 0) continue;
      out.push(...found);
      // The record is the truth: its copy is the newest there is (the version guard may still keep a
      // copy the hot path holds under a higher version, which only a lost record could produce).
      await this.push({ record: rec, hash: row.secret_hash, version: Number(row.version) });
    }
    return out;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.sweepTimer !== undefined) clearInterval(this.sweepTimer);
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    await this.hot.close();
  }
}
