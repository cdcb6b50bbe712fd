// The two storage backends of accounts and money. Each returns an account store and a ledger that
// share state, because the reserve step reads key caps and revocation written by the account store.
import type { RedisClient } from './redis-client.js';
import type { AccountStore, RestorableAccountStore } from '../accounts/account-store.js';
import { MemoryAccountStore } from './memory-account-store.js';
import { RedisAccountStore } from './redis-account-store.js';
import { DEFAULT_MARKER_TTL_SECONDS, DEFAULT_USAGE_MAX_RECORDS } from './ledger-common.js';
import type { Ledger } from './ledger.js';
import { MemoryLedger } from './memory-ledger.js';
import { newMemoryState } from './memory-state.js';
import { redisKeys } from './redis-keys.js';
import { RedisLedger } from './redis-ledger.js';

export const DEFAULT_KEY_MARKER = 'tg';
export const DEFAULT_REDIS_NAMESPACE = 'tg';

export interface Backend {
  accounts: AccountStore;
  ledger: Ledger;
}

/** A hot path (memory or Redis) whose account store can be written from the record (PostgreSQL). */
export interface HotBackend extends Backend {
  accounts: RestorableAccountStore;
}

export interface MemoryBackendOptions {
  keyMarker?: string;
  usageMaxRecords?: number;
  now?: () => number;
}

export function createMemoryBackend(opts: MemoryBackendOptions = {}): HotBackend {
  const state = newMemoryState();
  const now = opts.now ?? Date.now;
  return {
    accounts: new MemoryAccountStore(state, opts.keyMarker ?? DEFAULT_KEY_MARKER, now),
    ledger: new MemoryLedger(state, { usageMaxRecords: opts.usageMaxRecords ?? DEFAULT_USAGE_MAX_RECORDS, now }),
  };
}

export interface RedisBackendOptions {
  /** An ioredis connection the caller owns (and closes). */
  redis: RedisClient;
  /** Prefix of every key, default "tg". */
  namespace?: string;
  keyMarker?: string;
  /** Usage records kept per account, default 10,000 (older ones are folded into a counter). */
  usageMaxRecords?: number;
  /** How long settled/reaped markers are kept (exactly-once window), default 30 days. */
  markerTtlSeconds?: number;
  /** Every this many reaper passes the reaper reads every slot's index (default 60). */
  fullSweepEvery?: number;
  now?: () => number;
}

export function createRedisBackend(opts: RedisBackendOptions): HotBackend {
  const keys = redisKeys(opts.namespace ?? DEFAULT_REDIS_NAMESPACE);
  const now = opts.now ?? Date.now;
  const ledger = new RedisLedger({
    redis: opts.redis,
    keys,
    usageMaxRecords: opts.usageMaxRecords ?? DEFAULT_USAGE_MAX_RECORDS,
    ...(opts.fullSweepEvery === undefined ? {} : { fullSweepEvery: opts.fullSweepEvery }),
    markerTtlSeconds: opts.markerTtlSeconds ?? DEFAULT_MARKER_TTL_SECONDS,
    now,
  });
  // Load the scripts now so the first request does not pay for it; EVALSHA falls back on NOSCRIPT anyway.
  ledger.preload().catch(() => undefined);
  return {
    accounts: new RedisAccountStore({ redis: opts.redis, keys, keyMarker: opts.keyMarker ?? DEFAULT_KEY_MARKER, now }),
    ledger,
  };
}
