// Redis key names. Everything one script touches lives in the account's slot: under its hash tag
// `{<accountId>}`, or (the reaper index) under a tag chosen to land in the same slot, so every script
// runs on one slot of a Redis Cluster. Only the key-hash lookup, the account list and the set of slots
// with holds are global (plain single-key commands, never inside a script).
import { SCOPED } from './buckets.js';
import { slotOfTag, tagForSlot } from './cluster-slots.js';

export interface RedisKeys {
  /** A name under the account's hash tag (buckets.ts names the buckets' hashes so). */
  scoped(accountId: string, name: string): string;
  account(accountId: string): string;
  key(accountId: string, keyId: string): string;
  keys(accountId: string): string;
  hold(accountId: string, requestId: string): string;
  holds(accountId: string): string;
  /** A key's requests in flight (rate limits): request ids scored by hold deadline. */
  inflight(accountId: string, keyId: string): string;
  settled(accountId: string, requestId: string): string;
  reaped(accountId: string, requestId: string): string;
  usage(accountId: string): string;
  /** Stream of settlements PostgreSQL has yet to commit (the journal). */
  journal(accountId: string): string;
  credit(accountId: string, idempotencyKey: string): string;
  /**
   * The mark of a load of the account from the record under way (lua/seed-begin.lua): its token, and the
   * record transactions the unloaded account was told of meanwhile.
   */
  reload(accountId: string): string;
  /** SHA-256 of a secret -> "<accountId> <keyId>". */
  keyHash(secretHash: string): string;
  /** Zset of account ids by creation time. */
  accountList(): string;
  /**
   * Set when every key of the record was loaded into the key-hash lookup (gone with a wipe), and the mark
   * of a load under way; both under one tag so one script moves from the second to the first.
   */
  keyDirectoryComplete(): string;
  keyDirectoryLoading(): string;
  /**
   * The reaper index of the account's slot: account ids scored by (a lower bound of) their earliest
   * hold deadline. One per cluster slot, written by the reserve script itself.
   */
  reapIndex(accountId: string): string;
  /** The reaper index of one slot. */
  reapIndexOfSlot(slot: number): string;
  /** Set of slots whose reaper index may hold accounts: a hint the reaper reads each pass. */
  reapSlots(): string;
}

export function redisKeys(namespace: string): RedisKeys {
  const tag = (accountId: string): string => `${namespace}:{${accountId}}:`;
  return {
    scoped: (a, name) => `${tag(a)}${name}`,
    account: (a) => `${tag(a)}${SCOPED.account}`,
    key: (a, k) => `${tag(a)}${SCOPED.key(k)}`,
    keys: (a) => `${tag(a)}keys`,
    hold: (a, r) => `${tag(a)}hold:${r}`,
    holds: (a) => `${tag(a)}holds`,
    inflight: (a, k) => `${tag(a)}${SCOPED.inflight(k)}`,
    settled: (a, r) => `${tag(a)}settled:${r}`,
    reaped: (a, r) => `${tag(a)}reaped:${r}`,
    usage: (a) => `${tag(a)}usage`,
    journal: (a) => `${tag(a)}journal`,
    credit: (a, i) => `${tag(a)}credit:${i}`,
    reload: (a) => `${tag(a)}reload`,
    keyHash: (h) => `${namespace}:keyhash:${h}`,
    accountList: () => `${namespace}:accounts`,
    keyDirectoryComplete: () => `${namespace}:{key-directory}:complete`,
    keyDirectoryLoading: () => `${namespace}:{key-directory}:loading`,
    reapIndex: (a) => `${namespace}:{${tagForSlot(slotOfTag(a))}}:reap-index`,
    reapIndexOfSlot: (slot) => `${namespace}:{${tagForSlot(slot)}}:reap-index`,
    reapSlots: () => `${namespace}:reap-slots`,
  };
}
