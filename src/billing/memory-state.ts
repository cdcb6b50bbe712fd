// The in-memory backend's state, shared by its account store and its ledger (as Redis is shared by
// theirs): the ledger reads key caps and revocation that the account store writes.
import type { Account, ApiKeyRecord } from '../accounts/account-store.js';
import type { UsageRecord } from './ledger.js';

export interface MemoryHold {
  amount: number;
  keyId: string;
  month: string;
  deadline: number;
  /** The token window and tokens the hold counted against the key's token limit, when it has one. */
  rateWindow?: number;
  rateTokens?: number;
}

export interface MemoryRateCount {
  window: number;
  requests: number;
  tokens: number;
  /** Request id -> hold deadline, of the requests in flight. */
  inFlight: Map<string, number>;
}

export interface MemoryKey {
  record: ApiKeyRecord;
  lifetimeSpent: number;
  lifetimeHeld: number;
  monthSpent: Map<string, number>;
  monthHeld: Map<string, number>;
  /** The record's version of `record` (RestorableAccountStore.restoreKey); undefined when never given. */
  version?: number;
}

export type MemoryUsageEntry = { kind: 'usage'; record: UsageRecord } | { kind: 'refund'; requestId: string; amount: number };

export interface MemoryAccount {
  account: Account;
  /** The record's version of the account's default rate limits (restoreAccount); undefined when never given. */
  limitsVersion?: number;
  /** Rate-limit counts per key: the window they are for, requests and tokens in it, requests in flight. */
  rate: Map<string, MemoryRateCount>;
  balance: number;
  held: number;
  credited: number;
  refunded: number;
  /** Cost of usage records trimmed from `usage`. */
  usageArchived: number;
  keys: Map<string, MemoryKey>;
  holds: Map<string, MemoryHold>;
  settled: Map<string, { charged: number; keyId: string; refunded: boolean }>;
  reaped: Map<string, { amount: number; keyId: string; month: string }>;
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
    rate: new Map(),
    keys: new Map(),
    holds: new Map(),
    settled: new Map(),
    reaped: new Map(),
    usage: [],
    credits: new Map(),
  };
}
