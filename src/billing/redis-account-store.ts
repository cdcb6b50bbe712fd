// Accounts and keys in Redis. A key's record is a hash under its account's hash tag, so the reserve
// script reads revocation and caps in the same atomic step as the balance.
import type { RedisClient } from './redis-client.js';
import { randomUUID } from 'node:crypto';
import { KEY_AMOUNT_SETTINGS, type Account, type BudgetScope, type RestorableAccountStore, type ApiKeyRecord, type CreatedKey, type HotKeyLookup, type KeyCaps, type KeyChange, type KeyPointer, type KeySetting, type NewKeyOptions, type ScopeRecord } from '../accounts/account-store.js';
import { generateApiKey, hashApiKey } from '../accounts/api-key.js';
import { newAccountId } from '../accounts/ids.js';
import { newKeyRecord } from '../accounts/key-record.js';
import { checkCaps, checkImportedSecret, checkKeyChange, checkScopeBudgets } from '../accounts/validation.js';
import type { RedisKeys } from './redis-keys.js';
import { ScriptRunner } from './scripts.js';
import { BUDGET_FIELDS, KEY_CAP_FIELDS, SCOPED } from './buckets.js';
import { ACCOUNT_LIMIT_FIELDS, KEY_LIMIT_FIELDS, checkRateLimits, limitFieldPairs, limitsFromHash, type RateLimits } from '../accounts/rate-limits.js';

export interface RedisAccountStoreOptions {
  redis: RedisClient;
  keys: RedisKeys;
  keyMarker: string;
  now: () => number;
}

/** A key's caps, each kept under its field (buckets.ts: where the reserve script reads it). */
const CAP_SETTINGS = Object.keys(KEY_CAP_FIELDS) as Array<keyof typeof KEY_CAP_FIELDS>;
/** Hash fields of a key's amounts (micro-USD): its caps where the reserve script reads them (buckets.ts), and its cost ceiling; key.lua writes the same names. */
const KEY_AMOUNT_FIELDS: Record<(typeof KEY_AMOUNT_SETTINGS)[number], string> = { ...KEY_CAP_FIELDS, maxCostPerRequest: 'maxCost' };

function toRecord(h: Record<string, string>): ApiKeyRecord | undefined {
  if (!h.id || !h.accountId) return undefined;
  const rec: ApiKeyRecord = {
    id: h.id,
    accountId: h.accountId,
    name: h.name ?? '',
    displayHint: h.hint ?? '',
    createdAt: Number(h.createdAt),
  };
  if (h.revokedAt !== undefined) rec.revokedAt = Number(h.revokedAt);
  for (const s of KEY_AMOUNT_SETTINGS) {
    const v = h[KEY_AMOUNT_FIELDS[s]];
    if (v !== undefined) rec[s] = Number(v);
  }
  const limits = limitsFromHash(h, KEY_LIMIT_FIELDS);
  if (limits !== undefined) rec.rateLimits = limits;
  if (h.owner !== undefined && h.owner !== '') rec.ownerId = h.owner;
  if (h.team !== undefined && h.team !== '') rec.teamId = h.team;
  return rec;
}

/** A team's or member's budgets, each kept under its field (buckets.ts: where the reserve script reads it). */
const BUDGET_SETTINGS = Object.keys(BUDGET_FIELDS) as Array<keyof typeof BUDGET_FIELDS>;

/** A key's record as hash field, value pairs (never its spend, holds or rate-limit counters). */
function keyFields(record: ApiKeyRecord): string[] {
  const fields: string[] = ['id', record.id, 'accountId', record.accountId, 'name', record.name, 'hint', record.displayHint];
  fields.push('createdAt', String(record.createdAt));
  for (const s of KEY_AMOUNT_SETTINGS) {
    const v = record[s];
    if (v !== undefined) fields.push(KEY_AMOUNT_FIELDS[s], String(v));
  }
  if (record.revokedAt !== undefined) fields.push('revokedAt', String(record.revokedAt));
  fields.push(...limitFieldPairs(record.rateLimits, KEY_LIMIT_FIELDS));
  // Set once, at creation: the key scripts never clear it.
  if (record.ownerId !== undefined) fields.push('owner', record.ownerId);
  if (record.teamId !== undefined) fields.push('team', record.teamId);
  return fields;
}

export class RedisAccountStore implements RestorableAccountStore {
  private readonly redis: RedisClient;
  private readonly k: RedisKeys;
  private readonly marker: string;
  private readonly now: () => number;
  private readonly scripts: ScriptRunner;

  constructor(opts: RedisAccountStoreOptions) {
    this.redis = opts.redis;
    this.scripts = new ScriptRunner(opts.redis);
    this.k = opts.keys;
    this.marker = opts.keyMarker;
    this.now = opts.now;
  }

  async createAccount(name: string): Promise<Account> {
    const account: Account = { id: newAccountId(), name, createdAt: this.now() };
    await this.redis.hset(this.k.account(account.id), 'id', account.id, 'name', name, 'createdAt', String(account.createdAt));
    await this.redis.zadd(this.k.accountList(), account.createdAt, account.id);
    return account;
  }

  async getAccount(accountId: string): Promise<Account | undefined> {
    const [id, name, createdAt, drpm, dtpm, dconc] = await this.redis.hmget(this.k.account(accountId), 'id', 'name', 'createdAt', 'drpm', 'dtpm', 'dconc');
    if (!id) return undefined;
    const account: Account = { id, name: name ?? '', createdAt: Number(createdAt) };
    const limits = limitsFromHash({ drpm: drpm ?? undefined, dtpm: dtpm ?? undefined, dconc: dconc ?? undefined }, ACCOUNT_LIMIT_FIELDS);
    if (limits !== undefined) account.rateLimits = limits;
    return account;
  }

  async listAccounts(): Promise<Account[]> {
    const ids = await this.redis.zrange(this.k.accountList(), 0, -1);
    const found = await Promise.all(ids.map((id) => this.getAccount(id)));
    return found.filter((a): a is Account => a !== undefined);
  }

  async createKey(accountId: string, opts: NewKeyOptions = {}): Promise<CreatedKey> {
    const secret = generateApiKey(this.marker);
    const record = await this.storeKey(accountId, secret, opts);
    return { record, secret };
  }

  async importKey(accountId: string, secret: string, opts: NewKeyOptions = {}): Promise<ApiKeyRecord> {
    checkImportedSecret(secret, this.marker);
    const existing = await this.findKeyByHash(hashApiKey(secret));
    if (existing) {
      if (existing.accountId !== accountId) throw new Error('The imported API key already belongs to another account.');
      return existing;
    }
    return this.storeKey(accountId, secret, opts);
  }

  private async storeKey(accountId: string, secret: string, opts: NewKeyOptions): Promise<ApiKeyRecord> {
    const record = newKeyRecord(accountId, secret, opts, this.now());
    if (!(await this.getAccount(accountId))) throw new Error(`unknown account ${accountId}`);
    const fields = keyFields(record);
    // The record first, the lookup last: a lookup never points at a record that is not there yet.
    await this.redis
      .multi()
      .hset(this.k.key(accountId, record.id), ...fields)
      .zadd(this.k.keys(accountId), record.createdAt, record.id)
      .exec();
    const claimed = await this.redis.set(this.k.keyHash(hashApiKey(secret)), `${accountId} ${record.id}`, 'NX');
    if (claimed !== 'OK') {
      // Only an import racing another import of the same secret gets here; the record is unreachable.
      await this.redis.multi().del(this.k.key(accountId, record.id)).zrem(this.k.keys(accountId), record.id).exec();
      throw new Error('The API key is already registered.');
    }
    return record;
  }

  async findKeyByHash(secretHash: string): Promise<ApiKeyRecord | undefined> {
    const ref = await this.redis.get(this.k.keyHash(secretHash));
    if (!ref) return undefined;
    const sep = ref.indexOf(' ');
    return this.getKey(ref.slice(0, sep), ref.slice(sep + 1));
  }

  async getKey(accountId: string, keyId: string): Promise<ApiKeyRecord | undefined> {
    return toRecord(await this.redis.hgetall(this.k.key(accountId, keyId)));
  }

  async lookupKey(secretHash: string): Promise<HotKeyLookup> {
    const ref = await this.redis.get(this.k.keyHash(secretHash));
    if (!ref) return { kind: 'absent', directoryComplete: (await this.redis.exists(this.k.keyDirectoryComplete())) === 1 };
    const sep = ref.indexOf(' ');
    const accountId = ref.slice(0, sep);
    const keyId = ref.slice(sep + 1);
    const record = await this.getKey(accountId, keyId);
    return record === undefined ? { kind: 'dangling', accountId, keyId } : { kind: 'found', record };
  }

  async beginKeyDirectoryLoad(): Promise<string> {
    const token = randomUUID();
    await this.redis.set(this.k.keyDirectoryLoading(), token);
    return token;
  }

  async restoreKeyPointers(pointers: readonly KeyPointer[]): Promise<void> {
    if (pointers.length === 0) return;
    // Plain SETs: each pointer is its own slot on a cluster, and a hash never changes owner, so a write
    // racing a key's own push writes the same value.
    const pipeline = this.redis.pipeline();
    for (const p of pointers) pipeline.set(this.k.keyHash(p.secretHash), `${p.accountId} ${p.keyId}`);
    const results = await pipeline.exec();
    const failed = results?.find(([err]) => err !== null);
    if (failed?.[0]) throw failed[0];
  }

  async completeKeyDirectoryLoad(token: string): Promise<boolean> {
    const done = await this.scripts.run<number>('key-directory', [this.k.keyDirectoryLoading(), this.k.keyDirectoryComplete()], [token]);
    return done === 1;
  }

  async listKeys(accountId: string): Promise<ApiKeyRecord[]> {
    const ids = await this.redis.zrange(this.k.keys(accountId), 0, -1);
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hgetall(this.k.key(accountId, id));
    const results = (await pipeline.exec()) ?? [];
    const out: ApiKeyRecord[] = [];
    for (const [err, value] of results) {
      if (err) throw err;
      const rec = toRecord(value as Record<string, string>);
      if (rec) out.push(rec);
    }
    return out;
  }

  async revokeKey(accountId: string, keyId: string): Promise<boolean> {
    const key = this.k.key(accountId, keyId);
    if (!(await this.redis.hexists(key, 'id'))) return false;
    // HSETNX: revoking twice keeps the first revocation time.
    await this.redis.hsetnx(key, 'revokedAt', String(this.now()));
    return true;
  }

  async setKeyCaps(accountId: string, keyId: string, caps: KeyCaps): Promise<boolean> {
    checkCaps(caps);
    const key = this.k.key(accountId, keyId);
    if (!(await this.redis.hexists(key, 'id'))) return false;
    const m = this.redis.multi();
    for (const cap of CAP_SETTINGS) {
      const v = caps[cap];
      if (v === undefined) m.hdel(key, KEY_CAP_FIELDS[cap]);
      else m.hset(key, KEY_CAP_FIELDS[cap], String(v));
    }
    await m.exec();
    return true;
  }

  async updateKey(accountId: string, keyId: string, change: KeyChange): Promise<boolean> {
    checkKeyChange(change);
    const key = this.k.key(accountId, keyId);
    if (!(await this.redis.hexists(key, 'id'))) return false;
    // Only the fields the change names, in one MULTI: the others keep whatever they hold.
    const fields: Record<KeySetting, string> = { ...KEY_AMOUNT_FIELDS, ...KEY_LIMIT_FIELDS };
    const m = this.redis.multi();
    for (const [setting, field] of Object.entries(fields) as Array<[KeySetting, string]>) {
      const v = change[setting];
      if (v === null) m.hdel(key, field);
      else if (v !== undefined) m.hset(key, field, String(v));
    }
    await m.exec();
    return true;
  }

  async setKeyRateLimits(accountId: string, keyId: string, limits: RateLimits): Promise<boolean> {
    checkRateLimits(limits);
    const key = this.k.key(accountId, keyId);
    if (!(await this.redis.hexists(key, 'id'))) return false;
    const m = this.redis.multi().hdel(key, ...Object.values(KEY_LIMIT_FIELDS));
    const pairs = limitFieldPairs(limits, KEY_LIMIT_FIELDS);
    if (pairs.length > 0) m.hset(key, ...pairs);
    await m.exec();
    return true;
  }

  async setAccountRateLimits(accountId: string, limits: RateLimits): Promise<boolean> {
    checkRateLimits(limits);
    const account = await this.getAccount(accountId);
    if (account === undefined) return false;
    await this.writeAccount({ ...account, rateLimits: limits }, undefined);
    return true;
  }

  /** The account's identity and default limits, version-checked (lua/account.lua). */
  private async writeAccount(account: Account, version: number | undefined): Promise<void> {
    await this.scripts.run<number>('account', [this.k.account(account.id)], [
      version === undefined ? '' : String(version),
      account.id,
      account.name,
      String(account.createdAt),
      ...limitFieldPairs(account.rateLimits, ACCOUNT_LIMIT_FIELDS),
    ]);
  }

  async restoreAccount(account: Account, version?: number): Promise<void> {
    // Two commands, as createAccount: the account list lives in another cluster slot.
    await this.writeAccount(account, version);
    await this.redis.zadd(this.k.accountList(), account.createdAt, account.id);
  }

  async restoreKey(record: ApiKeyRecord, secretHash: string, version?: number): Promise<boolean> {
    const key = this.k.key(record.accountId, record.id);
    const fields = keyFields(record);
    // One script, so the version check and the write are one step; the record first, the lookup last
    // (as storeKey): a lookup never points at a missing record. The lookup lives in another cluster slot.
    const written = await this.scripts.run<number>('key', [key, this.k.keys(record.accountId)], [
      version === undefined ? '' : String(version),
      String(record.createdAt),
      record.id,
      ...fields,
    ]);
    await this.redis.set(this.k.keyHash(secretHash), `${record.accountId} ${record.id}`);
    return written === 1;
  }

  async restoreScope(record: ScopeRecord, version?: number): Promise<boolean> {
    checkScopeBudgets(record);
    const fields: string[] = [];
    if (record.name !== undefined) fields.push('name', record.name);
    for (const b of BUDGET_SETTINGS) {
      const v = record[b];
      if (v !== undefined) fields.push(BUDGET_FIELDS[b], String(v));
    }
    const at = this.k.scoped(record.accountId, SCOPED[record.scope](record.id));
    return (await this.scripts.run<number>('scope', [at], [version === undefined ? '' : String(version), ...fields])) === 1;
  }

  async getScope(accountId: string, scope: BudgetScope, id: string): Promise<ScopeRecord | undefined> {
    const [ver, name, ...budgets] = await this.redis.hmget(this.k.scoped(accountId, SCOPED[scope](id)), 'ver', 'name', ...BUDGET_SETTINGS.map((b) => BUDGET_FIELDS[b]));
    const record: ScopeRecord = { accountId, scope, id };
    if (name !== null && name !== undefined) record.name = name;
    BUDGET_SETTINGS.forEach((b, i) => {
      const v = budgets[i];
      if (v !== null && v !== undefined) record[b] = Number(v);
    });
    const held = ver !== null && ver !== undefined ? true : record.name !== undefined || BUDGET_SETTINGS.some((b) => record[b] !== undefined);
    return held ? record : undefined;
  }

  /** The caller owns the Redis connection. */
  async close(): Promise<void> {}
}
