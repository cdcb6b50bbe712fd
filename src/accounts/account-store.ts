// Accounts and their API keys. Only a hash of a key is ever stored; the secret exists once, at creation.
import type { Micros } from '../catalog/snapshot.js';
import type { RateLimitField, RateLimits } from './rate-limits.js';

/** The scopes with budgets besides a key's caps: a team, a member (the limits' scopes, src/limits). */
export type BudgetScope = 'team' | 'member';

export interface Account {
  id: string;
  name: string;
  createdAt: number;
  /** Rate limits of each key that sets none of its own; undefined = none. */
  rateLimits?: RateLimits;
}

export interface KeyCaps {
  /** Spending cap over the key's whole life; undefined = none. */
  lifetimeCap?: Micros;
  /** Spending cap per calendar month (UTC); undefined = none. */
  monthlyCap?: Micros;
}

/** The key's default cost ceiling per request (a request's x-tollgate-max-cost-usd header can lower it, not raise it). */
export interface KeyRequestCeiling {
  /** Micro-USD; undefined = none. */
  maxCostPerRequest?: Micros;
}

/** The key settings that are amounts of micro-USD (the others are rate limits). */
export const KEY_AMOUNT_SETTINGS = ['lifetimeCap', 'monthlyCap', 'maxCostPerRequest'] as const satisfies ReadonlyArray<keyof KeyCaps | keyof KeyRequestCeiling>;

/** A key's spending caps, cost ceiling per request and own rate limits, by name. */
export type KeySetting = keyof KeyCaps | keyof KeyRequestCeiling | RateLimitField;

/**
 * A partial change of a key's caps, cost ceiling per request and own rate limits: a setting left out
 * keeps its value, `null` clears it, a number sets it (micro-USD for caps and the ceiling).
 */
export type KeyChange = Partial<Record<KeySetting, number | null>>;

export interface ApiKeyRecord extends KeyCaps, KeyRequestCeiling {
  id: string;
  accountId: string;
  name: string;
  /** What the dashboard shows: the key's prefix and last four characters, e.g. `sk-tg-AbC…wxyz`. */
  displayHint: string;
  createdAt: number;
  /** Unix ms of revocation; undefined while active. */
  revokedAt?: number;
  /** The key's own rate limits (each overrides the account's default); undefined = none. */
  rateLimits?: RateLimits;
  /**
   * The member (dashboard user id) who made the key: they manage it, and it leaves with them. Undefined
   * for keys the operator made (the admin API, the local run's demo key) or made before members existed.
   */
  ownerId?: string;
  /** The team the key belongs to (its requests draw from the team's budgets too); undefined = none. */
  teamId?: string;
}

/** A team's or a member's budgets; undefined = none. */
export interface ScopeBudgets {
  /** Spending budget over the scope's whole life. */
  lifetimeBudget?: Micros;
  /** Spending budget per calendar month (UTC). */
  monthlyBudget?: Micros;
}

/** A team or a member as the hot path keeps it: what its budgets are, and what a refusal calls it. */
export interface ScopeRecord extends ScopeBudgets {
  accountId: string;
  scope: BudgetScope;
  /** The team's id, or the member's user id. */
  id: string;
  /** The team's name; none for a member (a refusal names the account instead). */
  name?: string;
}

export interface CreatedKey {
  record: ApiKeyRecord;
  /** The full secret: returned once, never stored. */
  secret: string;
}

export interface NewKeyOptions extends KeyCaps, KeyRequestCeiling {
  name?: string;
  rateLimits?: RateLimits;
  /** The member who makes the key (ApiKeyRecord.ownerId). */
  ownerId?: string;
  /** The team the key is made in (ApiKeyRecord.teamId). */
  teamId?: string;
}

export interface AccountStore {
  createAccount(name: string): Promise<Account>;
  getAccount(accountId: string): Promise<Account | undefined>;
  listAccounts(): Promise<Account[]>;
  createKey(accountId: string, opts?: NewKeyOptions): Promise<CreatedKey>;
  /** Register a secret chosen by the operator (the local run's TOLLGATE_DEMO_KEY); idempotent for the same secret. */
  importKey(accountId: string, secret: string, opts?: NewKeyOptions): Promise<ApiKeyRecord>;
  /** The hot-path lookup: by the SHA-256 hex of the presented secret. */
  findKeyByHash(secretHash: string): Promise<ApiKeyRecord | undefined>;
  getKey(accountId: string, keyId: string): Promise<ApiKeyRecord | undefined>;
  listKeys(accountId: string): Promise<ApiKeyRecord[]>;
  revokeKey(accountId: string, keyId: string): Promise<boolean>;
  setKeyCaps(accountId: string, keyId: string, caps: KeyCaps): Promise<boolean>;
  /** Changes only the settings `change` names, in one write; false when the account has no such key. */
  updateKey(accountId: string, keyId: string, change: KeyChange): Promise<boolean>;
  /** Sets the key's own rate limits given and clears the others; false when the account has no such key. */
  setKeyRateLimits(accountId: string, keyId: string, limits: RateLimits): Promise<boolean>;
  /** Sets the account's default rate limits for keys given and clears the others; false when no such account. */
  setAccountRateLimits(accountId: string, limits: RateLimits): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * A hot-path store (memory or Redis) that can be written from the record: PostgreSQL commits an account
 * or key first, then the hot path takes the same record. Both are idempotent upserts; a restored key
 * keeps whatever spend the hot path already counts for it.
 */
/**
 * What the hot path knows of a secret hash: the key; a pointer whose record is gone (the account's data
 * was lost, the directory of hashes was not); or nothing, with whether the hot path's directory of key
 * hashes is complete (every key of the record was loaded into it since it last lost its data).
 */
export type HotKeyLookup =
  | { kind: 'found'; record: ApiKeyRecord }
  | { kind: 'dangling'; accountId: string; keyId: string }
  | { kind: 'absent'; directoryComplete: boolean };

/** One entry of the directory of key hashes: the hash of a secret and the key it belongs to. */
export interface KeyPointer {
  secretHash: string;
  accountId: string;
  keyId: string;
}

export interface RestorableAccountStore extends AccountStore {
  /**
   * Writes the account (its default rate limits included). With a version (the record's count of
   * changes to those limits), an older copy than the hot path holds leaves the limits as they are.
   */
  restoreAccount(account: Account, version?: number): Promise<void>;
  /**
   * Writes the record as given (caps and revocation included) and points `secretHash` at it. With a
   * version (the record's count of changes to the key), a copy older than the one the hot path holds is
   * ignored, so copies that arrive out of order never bring an older state back. False when ignored.
   */
  restoreKey(record: ApiKeyRecord, secretHash: string, version?: number): Promise<boolean>;
  /** The hot-path lookup with the directory's state, so the record is asked only when it must be. */
  lookupKey(secretHash: string): Promise<HotKeyLookup>;
  /**
   * Loading the whole directory of key hashes from the record: `begin` marks a load under way (and
   * returns its token), `restoreKeyPointers` writes a page of pointers, `complete` marks the directory
   * complete only if a load's mark is still there (a wipe during the load drops it, and the next lookup
   * loads again). False when it did not.
   */
  beginKeyDirectoryLoad(): Promise<string>;
  restoreKeyPointers(pointers: readonly KeyPointer[]): Promise<void>;
  completeKeyDirectoryLoad(token: string): Promise<boolean>;
  /**
   * Writes a team's or a member's budgets (and a team's name) as given, leaving its spend and holds as
   * they are. With a version (the record's count of changes to them), an older copy than the hot path
   * holds is ignored. False when ignored.
   */
  restoreScope(record: ScopeRecord, version?: number): Promise<boolean>;
  /** A team or member as the hot path has it; undefined when it holds nothing of it. */
  getScope(accountId: string, scope: BudgetScope, id: string): Promise<ScopeRecord | undefined>;
}
