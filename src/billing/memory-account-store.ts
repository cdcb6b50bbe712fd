// Accounts and keys in process memory (local runs and tests). Same rules as the Redis store.
import { KEY_AMOUNT_SETTINGS, type Account, type BudgetScope, type RestorableAccountStore, type ApiKeyRecord, type CreatedKey, type HotKeyLookup, type KeyCaps, type KeyChange, type KeyPointer, type NewKeyOptions, type ScopeRecord } from '../accounts/account-store.js';
import { generateApiKey, hashApiKey } from '../accounts/api-key.js';
import { newAccountId } from '../accounts/ids.js';
import { newKeyRecord } from '../accounts/key-record.js';
import { checkCaps, checkImportedSecret, checkKeyChange, checkScopeBudgets } from '../accounts/validation.js';
import { newMemoryAccount, type MemoryState } from './memory-state.js';
import { SCOPED } from './buckets.js';
import { checkRateLimits, compactRateLimits, RATE_LIMIT_FIELDS, type RateLimits } from '../accounts/rate-limits.js';

const copy = (r: ApiKeyRecord): ApiKeyRecord => ({ ...r, ...(r.rateLimits === undefined ? {} : { rateLimits: { ...r.rateLimits } }) });
const copyAccount = (a: Account): Account => ({ ...a, ...(a.rateLimits === undefined ? {} : { rateLimits: { ...a.rateLimits } }) });

export class MemoryAccountStore implements RestorableAccountStore {
  private directoryLoads = 0;

  constructor(
    private readonly state: MemoryState,
    private readonly marker: string,
    private readonly now: () => number,
  ) {}

  async createAccount(name: string): Promise<Account> {
    const account: Account = { id: newAccountId(), name, createdAt: this.now() };
    this.state.accounts.set(account.id, newMemoryAccount(account));
    return { ...account };
  }

  async getAccount(accountId: string): Promise<Account | undefined> {
    const a = this.state.accounts.get(accountId);
    return a ? copyAccount(a.account) : undefined;
  }

  async listAccounts(): Promise<Account[]> {
    return [...this.state.accounts.values()].map((a) => copyAccount(a.account));
  }

  async createKey(accountId: string, opts: NewKeyOptions = {}): Promise<CreatedKey> {
    const secret = generateApiKey(this.marker);
    return { record: this.storeKey(accountId, secret, opts), secret };
  }

  async importKey(accountId: string, secret: string, opts: NewKeyOptions = {}): Promise<ApiKeyRecord> {
    checkImportedSecret(secret, this.marker);
    const ref = this.state.keyHash.get(hashApiKey(secret));
    if (ref) {
      if (ref.accountId !== accountId) throw new Error('The imported API key already belongs to another account.');
      const existing = this.state.accounts.get(accountId)?.keys.get(ref.keyId);
      if (existing) return copy(existing.record);
    }
    return this.storeKey(accountId, secret, opts);
  }

  private storeKey(accountId: string, secret: string, opts: NewKeyOptions): ApiKeyRecord {
    const record = newKeyRecord(accountId, secret, opts, this.now());
    const acct = this.state.accounts.get(accountId);
    if (!acct) throw new Error(`unknown account ${accountId}`);
    acct.keys.set(record.id, { record });
    this.state.keyHash.set(hashApiKey(secret), { accountId, keyId: record.id });
    return copy(record);
  }

  async findKeyByHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const ref = this.state.keyHash.get(secretHash);
    return ref ? this.getKey(ref.accountId, ref.keyId) : undefined;
  }

  async lookupKey(secretHash: string): Promise<HotKeyLookup> {
    const ref = this.state.keyHash.get(secretHash);
    if (ref === undefined) return { kind: 'absent', directoryComplete: this.state.keyDirectory === 'complete' };
    const record = await this.getKey(ref.accountId, ref.keyId);
    return record === undefined ? { kind: 'dangling', ...ref } : { kind: 'found', record };
  }

  async beginKeyDirectoryLoad(): Promise<string> {
    const token = String(++this.directoryLoads);
    this.state.keyDirectory = token;
    return token;
  }

  async restoreKeyPointers(pointers: readonly KeyPointer[]): Promise<void> {
    for (const p of pointers) this.state.keyHash.set(p.secretHash, { accountId: p.accountId, keyId: p.keyId });
  }

  async completeKeyDirectoryLoad(_token: string): Promise<boolean> {
    // As the Redis script: any load's mark will do (see lua/key-directory.lua); none means it was dropped.
    if (this.state.keyDirectory === undefined) return false;
    this.state.keyDirectory = 'complete';
    return true;
  }

  async getKey(accountId: string, keyId: string): Promise<ApiKeyRecord | undefined> {
    const k = this.state.accounts.get(accountId)?.keys.get(keyId);
    return k ? copy(k.record) : undefined;
  }

  async listKeys(accountId: string): Promise<ApiKeyRecord[]> {
    const keys = this.state.accounts.get(accountId)?.keys;
    return keys ? [...keys.values()].map((k) => copy(k.record)) : [];
  }

  async revokeKey(accountId: string, keyId: string): Promise<boolean> {
    const k = this.state.accounts.get(accountId)?.keys.get(keyId);
    if (!k) return false;
    k.record.revokedAt ??= this.now();
    return true;
  }

  async setKeyCaps(accountId: string, keyId: string, caps: KeyCaps): Promise<boolean> {
    checkCaps(caps);
    const k = this.state.accounts.get(accountId)?.keys.get(keyId);
    if (!k) return false;
    if (caps.lifetimeCap === undefined) delete k.record.lifetimeCap;
    else k.record.lifetimeCap = caps.lifetimeCap;
    if (caps.monthlyCap === undefined) delete k.record.monthlyCap;
    else k.record.monthlyCap = caps.monthlyCap;
    return true;
  }

  async updateKey(accountId: string, keyId: string, change: KeyChange): Promise<boolean> {
    checkKeyChange(change);
    const k = this.state.accounts.get(accountId)?.keys.get(keyId);
    if (!k) return false;
    for (const s of KEY_AMOUNT_SETTINGS) {
      const v = change[s];
      if (v === null) delete k.record[s];
      else if (v !== undefined) k.record[s] = v;
    }
    const limits: RateLimits = { ...k.record.rateLimits };
    for (const f of RATE_LIMIT_FIELDS) {
      const v = change[f];
      if (v === null) delete limits[f];
      else if (v !== undefined) limits[f] = v;
    }
    const own = compactRateLimits(limits);
    if (own === undefined) delete k.record.rateLimits;
    else k.record.rateLimits = own;
    return true;
  }

  async setKeyRateLimits(accountId: string, keyId: string, limits: RateLimits): Promise<boolean> {
    checkRateLimits(limits);
    const k = this.state.accounts.get(accountId)?.keys.get(keyId);
    if (!k) return false;
    const own = compactRateLimits(limits);
    if (own === undefined) delete k.record.rateLimits;
    else k.record.rateLimits = own;
    return true;
  }

  async setAccountRateLimits(accountId: string, limits: RateLimits): Promise<boolean> {
    checkRateLimits(limits);
    const a = this.state.accounts.get(accountId);
    if (!a) return false;
    const defaults = compactRateLimits(limits);
    if (defaults === undefined) delete a.account.rateLimits;
    else a.account.rateLimits = defaults;
    return true;
  }

  async restoreAccount(account: Account, version?: number): Promise<void> {
    const held = this.state.accounts.get(account.id);
    if (held === undefined) {
      const created = newMemoryAccount(copyAccount(account));
      if (version !== undefined) created.limitsVersion = version;
      this.state.accounts.set(account.id, created);
      return;
    }
    // An older copy of the default limits than the one held never overwrites it (see lua/account.lua).
    if (version !== undefined && held.limitsVersion !== undefined && held.limitsVersion > version) return;
    held.account = copyAccount(account);
    if (version !== undefined) held.limitsVersion = version;
  }

  async restoreKey(record: ApiKeyRecord, secretHash: string, version?: number): Promise<boolean> {
    const acct = this.state.accounts.get(record.accountId);
    if (!acct) throw new Error(`unknown account ${record.accountId}`);
    const k = acct.keys.get(record.id);
    // An older copy than the one held never overwrites it (see the Redis store's key script).
    if (k !== undefined && version !== undefined && k.version !== undefined && k.version > version) return false;
    if (k) k.record = copy(record);
    else acct.keys.set(record.id, { record: copy(record) });
    const held = acct.keys.get(record.id);
    if (held !== undefined && version !== undefined) held.version = version;
    this.state.keyHash.set(secretHash, { accountId: record.accountId, keyId: record.id });
    return true;
  }

  async restoreScope(record: ScopeRecord, version?: number): Promise<boolean> {
    checkScopeBudgets(record);
    const acct = this.state.accounts.get(record.accountId);
    if (!acct) throw new Error(`unknown account ${record.accountId}`);
    const at = SCOPED[record.scope](record.id);
    const held = acct.scopes.get(at);
    // An older copy than the one held never overwrites it (see the Redis store's scope script).
    if (held !== undefined && version !== undefined && held.version !== undefined && held.version > version) return false;
    acct.scopes.set(at, { record: { ...record }, ...(version === undefined ? (held?.version === undefined ? {} : { version: held.version }) : { version }) });
    return true;
  }

  async getScope(accountId: string, scope: BudgetScope, id: string): Promise<ScopeRecord | undefined> {
    const held = this.state.accounts.get(accountId)?.scopes.get(SCOPED[scope](id));
    return held === undefined ? undefined : { ...held.record };
  }

  async close(): Promise<void> {}
}
