// The in-memory backend's state, shared by its account store and its ledger (as Redis is shared by
// theirs): the ledger reads key caps and revocation that the account store writes.
import type { Account, ApiKeyRecord, ScopeRecord } from '../accounts/account-store.js';
import type { Bucket } from './buckets.js';
import type { UsageRecord } from './ledger.js';

export interface MemoryHold {
  amount: number;
  keyId: string;
  month: string;
  deadline: number;
  /** The buckets the hold drew from (as reserved), so the settlement and the reaper release exactly those. */
  buckets: readonly Bucket[];
  /** By bucket index: the window and the count a give-back bucket counted, for the settlement to return the unused part. */
  windows: Map<number, { window: number; counted: number }>;
}

export interface MemoryReapedHold {
  amount: number;
  keyId: string;
  month: string;
  buckets: readonly Bucket[];
}

export interface MemoryKey {
  record: ApiKeyRecord;
  /** The record's version of `record` (RestorableAccountStore.restoreKey); undefined when never given. */
  version?: number;
}

export interface MemoryScope {
  record: ScopeRecord;
  /** The record's version of `record` (RestorableAccountStore.restoreScope); undefined when never given. */
  version?: number;
}

export type MemoryUsageEntry = { kind: 'usage'; record: UsageRecord } | { kind: 'refund'; requestId: string; amount: number };

export interface MemoryAccount {
  account: Account;
  /** The record's version of the account's default rate limits (restoreAccount); undefined when never given. */
  limitsVersion?: number;
  /**
   * The buckets' counters (spend, holds, window counts), by the name of the hash the Redis ledger keeps
   * them in (buckets.ts: 'key:<id>') and then by field, so both ledgers read one description.
   */
  counters: Map<string, Map<string, number>>;
  /** Requests in flight by bucket (its set's name, 'inflight:<keyId>'): request id -> hold deadline. */
  inFlight: Map<string, Map<string, number>>;
  balance: number;
  held: number;
  credited: number;
  refunded: number;
  /** Cost of usage records trimmed from `usage`. */
  usageArchived: number;
  keys: Map<string, MemoryKey>;
  /** Teams' and members' budgets and names, by the name of their hash in Redis (buckets.ts: 'team:<id>', 'member:<id>'). */
  scopes: Map<string, MemoryScope>;
  holds: Map<string, MemoryHold>;
  settled: Map<string, { charged: number; keyId: string; refunded: boolean }>;
  reaped: Map<string, MemoryReapedHold>;
  /** Oldest first. */
  usage: MemoryUsageEntry[];
  /** Idempotency key -> the amount it credited. */
  credits: Map<string, number>;
}

export interface MemoryState {
  accounts: Map<string, MemoryAccount>;
  keyHash: Map<string, { accountId: string; keyId: string }>;
  /** The directory of key hashes: 'complete' once loaded from the record, a load's token while one runs. */
  keyDirectory?: string;
}

export function newMemoryState(): MemoryState {
  return { accounts: new Map(), keyHash: new Map() };
}

export function newMemoryAccount(account: Account): MemoryAccount {
  return {
    account,
    balance: 0,
    held: 0,
    credited: 0,
    refunded: 0,
    usageArchived: 0,
    counters: new Map(),
    inFlight: new Map(),
    keys: new Map(),
    scopes: new Map(),
    holds: new Map(),
    settled: new Map(),
    reaped: new Map(),
    usage: [],
    credits: new Map(),
  };
}
