// Accounts and keys with PostgreSQL as their record: every change commits there first, then the hot
// path (Redis or memory) takes the same record. A lookup the hot path misses (a flushed or new Redis,
// a restarted local run) is answered from PostgreSQL and seeds the hot path again, so a wipe loses no
// key and never brings a revoked key back. Only the SHA-256 hex of a secret is stored.
import type { Account, AccountStore, ApiKeyRecord, CreatedKey, KeyCaps, NewKeyOptions, RestorableAccountStore } from '../accounts/account-store.js';
import { generateApiKey, hashApiKey } from '../accounts/api-key.js';
import { newAccountId } from '../accounts/ids.js';
import { newKeyRecord } from '../accounts/key-record.js';
import { checkCaps, checkImportedSecret } from '../accounts/validation.js';
import type { Database, SqlValue } from './database.js';

interface AccountRow {
  id: string;
  name: string;
  created_ms: number;
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
}

const ACCOUNT_COLUMNS = `id, name, (extract(epoch FROM created_at) * 1000)::bigint AS created_ms`;
const KEY_COLUMNS = `id, account_id, secret_hash, display_prefix, last_four, name, lifetime_cap, monthly_cap,
  (extract(epoch FROM created_at) * 1000)::bigint AS created_ms, (extract(epoch FROM revoked_at) * 1000)::bigint AS revoked_ms`;

/** The display hint `sk-tg-AbCd…wxyz` as the table keeps it: prefix and last four. */
function splitHint(hint: string): { prefix: string; lastFour: string } {
  const at = hint.lastIndexOf('…');
  return at < 0 ? { prefix: hint, lastFour: '' } : { prefix: hint.slice(0, at), lastFour: hint.slice(at + 1) };
}

function toAccount(r: AccountRow): Account {
  return { id: r.id, name: r.name, createdAt: Number(r.created_ms) };
}

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
  if (r.revoked_ms !== null) rec.revokedAt = Number(r.revoked_ms);
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
}

export class RecordedAccountStore implements AccountStore {
  private readonly db: Database;
  private readonly hot: RestorableAccountStore;
  private readonly marker: string;
  private readonly now: () => number;
  private readonly onAccountCreated: ((accountId: string) => Promise<void>) | undefined;

  constructor(opts: RecordedAccountStoreOptions) {
    this.db = opts.db;
    this.hot = opts.hot;
    this.marker = opts.keyMarker;
    this.now = opts.now ?? Date.now;
    this.onAccountCreated = opts.onAccountCreated;
  }

  async createAccount(name: string): Promise<Account> {
    const account: Account = { id: newAccountId(), name, createdAt: this.now() };
    await this.db.query('INSERT INTO accounts (id, name, created_at) VALUES ($1, $2, to_timestamp($3::double precision / 1000))', [account.id, name, account.createdAt]);
    await this.hot.restoreAccount(account);
    await this.onAccountCreated?.(account.id);
    return account;
  }

  private async recordedAccount(accountId: string): Promise<Account | undefined> {
    const r = await this.db.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = $1`, [accountId]);
    return r.rows[0] === undefined ? undefined : toAccount(r.rows[0]);
  }

  async getAccount(accountId: string): Promise<Account | undefined> {
    const hot = await this.hot.getAccount(accountId);
    if (hot !== undefined) return hot;
    const account = await this.recordedAccount(accountId);
    if (account !== undefined) await this.hot.restoreAccount(account);
    return account;
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
    const account = await this.recordedAccount(accountId);
    if (account === undefined) throw new Error(`unknown account ${accountId}`);
    const hash = hashApiKey(secret);
    const { prefix, lastFour } = splitHint(record.displayHint);
    const inserted = await this.db.query(
      `INSERT INTO api_keys (id, account_id, secret_hash, display_prefix, last_four, name, lifetime_cap, monthly_cap, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, to_timestamp($9::double precision / 1000))
       ON CONFLICT (secret_hash) DO NOTHING`,
      [record.id, accountId, hash, prefix, lastFour, record.name, record.lifetimeCap ?? null, record.monthlyCap ?? null, record.createdAt],
    );
    // Only an import racing another import of the same secret gets here.
    if (inserted.rowCount === 0) throw new Error('The API key is already registered.');
    await this.hot.restoreAccount(account);
    await this.hot.restoreKey(record, hash);
    return record;
  }

  private async recordedKey(where: string, params: readonly SqlValue[]): Promise<{ record: ApiKeyRecord; hash: string } | undefined> {
    const r = await this.db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE ${where}`, params);
    const row = r.rows[0];
    return row === undefined ? undefined : { record: toKey(row), hash: row.secret_hash };
  }

  /** Seeds the hot path with a key (and its account) read from the record. */
  private async reseed(found: { record: ApiKeyRecord; hash: string }): Promise<ApiKeyRecord> {
    const account = await this.recordedAccount(found.record.accountId);
    if (account !== undefined) await this.hot.restoreAccount(account);
    await this.hot.restoreKey(found.record, found.hash);
    return found.record;
  }

  async findKeyByHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const hot = await this.hot.findKeyByHash(secretHash);
    if (hot !== undefined) return hot;
    const found = await this.recordedKey('secret_hash = $1', [secretHash]);
    return found === undefined ? undefined : this.reseed(found);
  }

  async getKey(accountId: string, keyId: string): Promise<ApiKeyRecord | undefined> {
    const hot = await this.hot.getKey(accountId, keyId);
    if (hot !== undefined) return hot;
    const found = await this.recordedKey('account_id = $1 AND id = $2', [accountId, keyId]);
    return found === undefined ? undefined : this.reseed(found);
  }

  async listKeys(accountId: string): Promise<ApiKeyRecord[]> {
    const r = await this.db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE account_id = $1 ORDER BY created_at, id`, [accountId]);
    return r.rows.map(toKey);
  }

  async revokeKey(accountId: string, keyId: string): Promise<boolean> {
    // Revoking twice keeps the first revocation time.
    const r = await this.db.query(
      `UPDATE api_keys SET revoked_at = coalesce(revoked_at, to_timestamp($3::double precision / 1000)) WHERE account_id = $1 AND id = $2`,
      [accountId, keyId, this.now()],
    );
    if (r.rowCount === 0) return false;
    await this.pushKey(accountId, keyId);
    return true;
  }

  async setKeyCaps(accountId: string, keyId: string, caps: KeyCaps): Promise<boolean> {
    checkCaps(caps);
    const r = await this.db.query('UPDATE api_keys SET lifetime_cap = $3, monthly_cap = $4 WHERE account_id = $1 AND id = $2', [
      accountId,
      keyId,
      caps.lifetimeCap ?? null,
      caps.monthlyCap ?? null,
    ]);
    if (r.rowCount === 0) return false;
    await this.pushKey(accountId, keyId);
    return true;
  }

  /** Puts the account and every one of its keys, as the record has them, back into the hot path. */
  async restoreAccountKeys(accountId: string): Promise<void> {
    const account = await this.recordedAccount(accountId);
    if (account === undefined) return;
    await this.hot.restoreAccount(account);
    const r = await this.db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE account_id = $1`, [accountId]);
    for (const row of r.rows) await this.hot.restoreKey(toKey(row), row.secret_hash);
  }

  /** After a committed change: the hot path takes the key as the record now has it. */
  private async pushKey(accountId: string, keyId: string): Promise<void> {
    const found = await this.recordedKey('account_id = $1 AND id = $2', [accountId, keyId]);
    if (found !== undefined) await this.reseed(found);
  }

  async close(): Promise<void> {
    await this.hot.close();
  }
}
