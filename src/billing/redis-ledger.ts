// The ledger in Redis: every money movement is one Lua script over one account's keys.
import { randomBytes } from 'node:crypto';
import { encodeRequestDetail } from './request-detail.js';
import type { RedisClient } from './redis-client.js';
import {
  AccountNotSeededError,
  AccountRebuildingError,
  type AccountSeed,
  type HotMovement,
  type HotPathMovements,
  type SeededLedger,
  type SeedOutcome,
} from './ledger.js';
import type {
  AccountLoader,
  AccountBalance,
  BudgetScope,
  AuditReport,
  HoldsSummary,
  JournalingLedger,
  JournalSink,
  KeySpend,
  Ledger,
  MoneyStanding,
  ReapResult,
  RefundOutcome,
  ReservationOutcome,
  ReservationRequest,
  SettlementOutcome,
  SettlementRequest,
  UsageRecord,
} from './ledger.js';
import { SLOTS, slotOfTag } from './cluster-slots.js';
import { utcMonth } from './month.js';
import type { RedisKeys } from './redis-keys.js';
import { SettlementBatcher } from './settlement-batch.js';
import { ScriptRunner } from './scripts.js';
import { checkPositiveAmount, CreditConflictError, checkReservation, checkSettlement, trimThreshold, usageFromFields } from './ledger-common.js';
import { DEFAULT_RATE_LIMIT_WINDOW_MS, rateLimitedTokens, rateLimitStateOf } from './rate-limit-state.js';
import { bucketHashes, bucketsHeld, bucketsOf, fieldFor, KEY_SPEND_FIELDS, requestPath, SCOPED, type Bucket, type BucketPath } from './buckets.js';
import { decodeReserveReply, decodeSettleReply } from './script-replies.js';

export interface RedisLedgerOptions {
  redis: RedisClient;
  keys: RedisKeys;
  usageMaxRecords: number;
  markerTtlSeconds: number;
  now: () => number;
  /** Every this many reaper passes the index of every slot is read (default FULL_SWEEP_EVERY). */
  fullSweepEvery?: number;
  /** Settlements of one slot arriving within this many ms go as one script call (0: each alone). */
  settleBatchMs?: number;
}

/** Settlements that arrive within this window share one script call per slot (group commit). */
export const DEFAULT_SETTLE_BATCH_MS = 2;
/** At most this many settlements per batch call. */
const SETTLE_BATCH_MAX = 64;

/** Every this many reaper passes, the index of every slot is read (catches a lost announcement). */
const FULL_SWEEP_EVERY = 60;
/** Slot indexes read per batch of auto-pipelined commands. */
const SLOT_BATCH = 1024;
/** Holds the reaper returns per script call (bounds the script's run time). */
const REAP_BATCH = 100;
/** Accounts the reaper visits per index read. */
const REAP_ACCOUNTS_BATCH = 100;
/** Stream entries read per page when listing usage. */
const USAGE_PAGE = 500;
/** Reaper-index entries per ZSCAN step when summing outstanding holds. */
const HOLDS_SCAN_PAGE = 500;
/** Accounts whose last seq is kept (see RedisLedger.seen). */
const MAX_SEEN_ACCOUNTS = 100_000;
/**
 * How long a reload's mark outlives its last begin (seed-begin.lua): far past a read of the record, so
 * only a reload that died leaves it to expire; a read slower than this is read again.
 */
const RELOAD_MARK_MS = 60_000;
const SEED_REPLIES: Readonly<Record<number, SeedOutcome>> = { 1: 'seeded', 0: 'loaded already', [-1]: 'read again' };

/** A request path's description for the scripts (RedisLedger.describe). */
interface PathDescription {
  readonly buckets: readonly Bucket[];
  /** The buckets with complete names, as the hold keeps them (bucketsHeld). */
  readonly held: string;
  /** The keys of the hashes the buckets name, for a script's declared keys. */
  readonly hashKeys: readonly string[];
}

/** Paths whose description a ledger keeps before it starts again (about 2 KB each). */
const DESCRIBED_PATHS = 4096;

/** A script's own keys, in their places, then every hash key not among them. */
function withHashKeys(own: string[], hashKeys: readonly string[]): string[] {
  const keys = own.slice();
  for (const key of hashKeys) if (!own.includes(key)) keys.push(key);
  return keys;
}

export class RedisLedger implements Ledger, SeededLedger, JournalingLedger, HotPathMovements {
  private readonly redis: RedisClient;
  private readonly k: RedisKeys;
  private readonly scripts: ScriptRunner;
  private readonly settlements: SettlementBatcher;
  private readonly opts: RedisLedgerOptions;
  private passes = 0;
  /** Accounts' money comes from the record: scripts refuse an account that was not seeded. */
  private seeding = false;
  /** A journal writer takes every settlement to the record: the settle script appends its journal entry. */
  private journaling = false;
  /** The journal writer's intake: settlements applied and reservations refused, as their replies are read. */
  private sink: JournalSink | undefined;
  /** Makes a seeded account ready (loads it from the record) when a script refuses it. */
  private loader: AccountLoader | undefined;
  /**
   * Holds this process admitted on seeded accounts, with the generation that took them, until settled:
   * what the settlement of a hold lost with a wiped Redis needs to be charged. Kept here, not passed
   * back by the caller, so a repeat of a settlement this process already applied names no hold and
   * stays a no-op after a wipe took its settled marker (the journal has the first).
   */
  private readonly holds = new Map<string, { generation: string; amount: number; seq: number }>();
  /**
   * The highest seq each account's Redis copy answered this process with (seeded accounts only). Passed
   * to the next reserve and settle, folded into their scripts: a Redis that answers with a lower seq
   * lost acknowledged writes and has the account loaded again from the record (see lua/common.lua).
   */
  private readonly seen = new Map<string, number>();
  /** Each request path's description for the scripts, made once (see describe). */
  private readonly described = new Map<string, PathDescription>();

  constructor(opts: RedisLedgerOptions) {
    this.opts = opts;
    this.redis = opts.redis;
    this.k = opts.keys;
    this.scripts = new ScriptRunner(opts.redis);
    this.settlements = new SettlementBatcher(this.scripts, { windowMs: opts.settleBatchMs ?? DEFAULT_SETTLE_BATCH_MS, maxBatch: SETTLE_BATCH_MAX });
  }

  preload(): Promise<void> {
    return this.scripts.preload();
  }

  requireSeeding(loader?: AccountLoader): void {
    this.seeding = true;
    if (loader !== undefined) this.loader = loader;
  }

  journalSettlements(sink?: JournalSink): void {
    this.journaling = true;
    if (sink !== undefined) this.sink = sink;
  }

  /** Notes a seq an account's Redis copy answered with. */
  private saw(accountId: string, seq: number | string | undefined): void {
    const n = Number(seq);
    if (!Number.isSafeInteger(n) || n <= (this.seen.get(accountId) ?? 0)) return;
    // Bounded like the key cache: forgetting only loses the check for accounts idle since.
    if (this.seen.size >= MAX_SEEN_ACCOUNTS && !this.seen.has(accountId)) this.seen.clear();
    this.seen.set(accountId, n);
  }

  /** The highest seq the account's Redis copy answered this process with (0 when none, or not seeded). */
  seenSeq(accountId: string): number {
    return this.seen.get(accountId) ?? 0;
  }

  /**
   * Reconciliation's repair: an account whose Redis copy is at a lower seq than the record has seen is
   * marked unloaded (the next call loads it from the record). Returns whether it was, and Redis's seq.
   */
  async markStaleIfBehind(accountId: string, recordSeq: number): Promise<{ marked: boolean; seq: number }> {
    const [marked, seq] = await this.scripts.run<[number, number]>('stale', [this.k.account(accountId)], [String(recordSeq)]);
    return { marked: marked === 1, seq: Number(seq) };
  }

  async beginSeed(accountId: string): Promise<string | undefined> {
    const token = await this.scripts.run<string>('seed-begin', [this.k.account(accountId), this.k.reload(accountId)], [randomBytes(8).toString('hex'), String(RELOAD_MARK_MS)]);
    return token === '' ? undefined : token;
  }

  /** One script: loads the account's money unless it has a generation already, or the read is too old. */
  async seedAccount(seed: AccountSeed): Promise<SeedOutcome> {
    const a = seed.accountId;
    // Every hash whose spend the seed sets: keys with spend, then every team and member of the account.
    const spent = [
      ...seed.keys.map((k) => ({ at: this.k.key(a, k.keyId), ...k })),
      ...seed.teams.map((t) => ({ at: this.k.scoped(a, SCOPED.team(t.id)), ...t })),
      ...seed.members.map((m) => ({ at: this.k.scoped(a, SCOPED.member(m.id)), ...m })),
    ];
    const keys = [this.k.account(a), this.k.usage(a), this.k.holds(a), this.k.keys(a), this.k.reload(a), ...spent.map((h) => h.at)];
    const args = [
      seed.generation,
      seed.snapshot,
      String(seed.windowMs),
      String(seed.balance),
      String(seed.credited),
      String(seed.refunded),
      String(seed.charged),
      seed.month,
      // Past what the record and this process saw: no gateway's next call takes the new copy for one behind.
      String(Math.max(seed.recordSeq, this.seen.get(a) ?? 0)),
      seed.reload,
      ...spent.flatMap((h) => [String(h.lifetimeSpent), String(h.monthSpent)]),
    ];
    const r = await this.scripts.run<number>('seed', keys, args);
    const outcome = SEED_REPLIES[r];
    if (outcome === undefined) throw new Error(`unknown seed reply ${r}`);
    return outcome;
  }

  async applyMovement(m: HotMovement): Promise<boolean> {
    if (!Number.isSafeInteger(m.amount) || m.amount === 0) throw new RangeError('a movement is a non-zero whole number of micro-USD');
    if (!m.idempotencyKey) throw new Error('a movement needs an idempotency key');
    const [r, seq] = await this.scripts.run<[number, number?]>(
      'adjust',
      [this.k.account(m.accountId), this.k.credit(m.accountId, m.idempotencyKey), this.k.reload(m.accountId)],
      [String(m.amount), m.counts, String(this.opts.now()), m.recordTx, this.seeding ? '1' : '', String(this.seeding ? (this.seen.get(m.accountId) ?? 0) : 0)],
    );
    if (r === 1 && this.seeding) this.saw(m.accountId, seq);
    if (r === -1) throw new Error(`unknown account ${m.accountId}`);
    if (r === -4) throw new AccountNotSeededError(m.accountId);
    if (r === -2) throw new RangeError('the movement would take the balance past the largest exact amount');
    if (r === -3) throw new CreditConflictError(m.idempotencyKey);
    return r === 1;
  }

  /**
   * One round trip, one command: the reserve script writes the hold and the account's entry in its
   * slot's reaper index together (deadline and month from Redis's clock, not this pod's). Only when that
   * entry made the slot's index non-empty is the slot named in the reaper's set of slots, by a plain
   * SADD after the reply (that set is one key, in one cluster slot, so no script of an account can write
   * it). If that SADD is lost, or races the reaper clearing an empty slot, or the set lost the slot some
   * other way, the periodic full sweep still finds the hold: reaped a few minutes late, never lost.
   */
  reserve(req: ReservationRequest): Promise<ReservationOutcome> {
    return this.reserveAt(req, 1);
  }

  private async reserveAt(req: ReservationRequest, attempt: number): Promise<ReservationOutcome> {
    checkReservation(req);
    const a = req.accountId;
    const { buckets, held, hashKeys } = this.describe(a, req);
    const keys = withHashKeys([this.k.account(a), this.k.hold(a, req.requestId), this.k.holds(a), this.k.reapIndex(a), this.k.key(a, req.keyId)], hashKeys);
    const args = [
      String(req.amount),
      String(req.holdTtlMs),
      req.requestId,
      a,
      req.now === undefined ? '' : String(req.now),
      this.seeding ? '1' : '',
      String(this.seeding ? (this.seen.get(a) ?? 0) : 0),
      String(req.rateLimitTokens ?? 0),
      String(req.rateLimitWindowMs ?? DEFAULT_RATE_LIMIT_WINDOW_MS),
      held,
      req.keyId,
      req.teamId ?? '',
      req.memberId ?? '',
    ];
    const r = decodeReserveReply(await this.scripts.run<Array<number | string>>('reserve', keys, args), buckets);
    switch (r.kind) {
      case 'not_seeded':
      case 'rebuilding':
        await this.readyOrThrow(r.kind === 'not_seeded' ? new AccountNotSeededError(a) : new AccountRebuildingError(a, r.retryAfterMs), attempt);
        return this.reserveAt(req, attempt + 1);
      case 'admitted': {
        if (r.announce) this.announceSlot(a);
        const rateLimit = rateLimitStateOf(r.readings, r.resetMs);
        const limited = rateLimit === undefined ? {} : { rateLimit };
        if (r.generation === '') return { admitted: true, ...limited };
        this.saw(a, r.seq);
        this.holds.set(req.requestId, { generation: r.generation, amount: req.amount, seq: r.seq });
        return { admitted: true, generation: r.generation, ...limited };
      }
      case 'refused': {
        this.sink?.refused(req, r.reason);
        const rateLimit = rateLimitStateOf(r.readings, r.resetMs);
        const { reason, needed, available, availableOverall, scopeName, accountName } = r;
        // The value of a limit that is set on its scope (a cap, a budget, a rate limit); the balance has none.
        const at = buckets.findIndex((b) => b.reason === reason);
        const limit = buckets[at]?.limit.length === 0 ? undefined : r.readings[at]?.limit;
        return { admitted: false, reason, needed, available, availableOverall, ...(limit === undefined ? {} : { limit }), scopeName, accountName, ...(rateLimit === undefined ? {} : { rateLimit }) };
      }
      default: {
        const never: never = r;
        throw new Error(`unknown reserve reply ${JSON.stringify(never)}`);
      }
    }
  }

  /** The hashes the buckets name, as a script's declared keys (Redis Cluster routes by them). */
  private bucketKeys(accountId: string, buckets: readonly Bucket[]): string[] {
    return bucketHashes(buckets).map((at) => this.k.scoped(accountId, at));
  }

  /**
   * A request path's buckets, the copy a hold keeps of them and their hashes' keys: the same for every
   * request of an account on that path (the limits are declared in code), so made on its first request
   * and kept; a few thousand paths at most, then all are made again (the profile had the making at 7% of
   * the gateway's CPU, twice a request).
   */
  private describe(accountId: string, ids: { keyId: string; teamId?: string | undefined; memberId?: string | undefined }): PathDescription {
    const id = `${accountId}\n${ids.keyId}\n${ids.teamId ?? ''}\n${ids.memberId ?? ''}`;
    let described = this.described.get(id);
    if (described === undefined) {
      const buckets = bucketsOf(requestPath(ids));
      described = { buckets, held: bucketsHeld(buckets), hashKeys: this.bucketKeys(accountId, buckets) };
      if (this.described.size >= DESCRIBED_PATHS) this.described.clear();
      this.described.set(id, described);
    }
    return described;
  }

  /** One round trip: the settle script. */
  settle(req: SettlementRequest): Promise<SettlementOutcome> {
    return this.settleAt(req, 1);
  }

  private async settleAt(req: SettlementRequest, attempt: number): Promise<SettlementOutcome> {
    checkSettlement(req);
    const a = req.accountId;
    const now = req.now ?? this.opts.now();
    const hold = this.holds.get(req.requestId);
    const seen = this.seeding ? Math.max(this.seen.get(a) ?? 0, hold?.seq ?? 0) : 0;
    const { held, hashKeys } = this.describe(a, req);
    const reply = await this.settlements.run(
      slotOfTag(a),
      withHashKeys(
        [
          this.k.account(a),
          this.k.hold(a, req.requestId),
          this.k.holds(a),
          this.k.settled(a, req.requestId),
          this.k.reaped(a, req.requestId),
          this.k.usage(a),
          this.k.journal(a),
        ],
        hashKeys,
      ),
      [
        String(req.cost),
        req.requestId,
        req.keyId,
        req.model,
        String(req.usage.input),
        String(req.usage.output),
        String(req.usage.cachedInput),
        String(req.usage.reasoning),
        req.status,
        String(Math.max(0, Math.round(req.latencyMs))),
        String(now),
        String(this.opts.markerTtlSeconds),
        String(this.opts.usageMaxRecords),
        String(trimThreshold(this.opts.usageMaxRecords)),
        this.seeding ? '1' : '',
        hold?.generation ?? '',
        String(hold?.amount ?? 0),
        this.journaling ? '1' : '',
        String(seen),
        this.journaling ? encodeRequestDetail(req.detail) : '',
        String(rateLimitedTokens(req.usage)),
        String(req.usage.cacheWrite5m ?? 0),
        String(req.usage.cacheWrite1h ?? 0),
        held,
        req.teamId ?? '',
        req.memberId ?? '',
      ],
    );
    const r = decodeSettleReply(reply);
    if (r.kind === 'not_seeded') {
      await this.readyOrThrow(new AccountNotSeededError(a), attempt);
      return this.settleAt(req, attempt + 1);
    }
    if (hold !== undefined) this.holds.delete(req.requestId);
    const out: SettlementOutcome = { charged: r.charged, released: r.released, duplicate: r.duplicate, late: r.late };
    if (r.journal !== undefined) {
      out.journal = { entryId: r.journal.entryId, month: r.journal.month, reserved: r.journal.reserved, time: now };
      if (r.journal.generation !== '') out.journal.generation = r.journal.generation;
      // The seq matters where the account is loaded from the record (seeded): it goes to the record.
      if (r.journal.seq !== undefined && this.seeding) {
        out.journal.seq = r.journal.seq;
        this.saw(a, r.journal.seq);
      }
      if (!out.duplicate) this.sink?.settled(req, out);
    }
    return out;
  }

  /** A script refused the account: the loader makes it ready for the next attempt; without one, the refusal is thrown. */
  private readyOrThrow(err: AccountNotSeededError | AccountRebuildingError, attempt: number): Promise<void> {
    return this.loader === undefined ? Promise.reject(err) : this.loader.ready(err, attempt);
  }

  async reapExpired(nowArg?: number): Promise<number> {
    return (await this.reap(nowArg)).count;
  }

  /** Tells the reaper that `accountId`'s slot may hold holds. */
  private announceSlot(accountId: string): void {
    // Fire and forget: a lost announcement delays reaping until the next full sweep, never loses a hold.
    this.redis.sadd(this.k.reapSlots(), String(slotOfTag(accountId))).catch(() => undefined);
  }

  /** Redis's clock, in unix ms: the one hold deadlines are set by. */
  private async redisNow(): Promise<number> {
    const [seconds, micros] = await this.redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  async reap(nowArg?: number): Promise<ReapResult> {
    const now = nowArg ?? (await this.redisNow());
    const total: ReapResult = { count: 0, released: 0 };
    // Every FULL_SWEEP_EVERY passes the index of every slot is read, so a hold whose slot announcement
    // was lost (the plain SADD after the script) is still reaped, at most a few minutes late.
    // Not on the first pass: a gateway that starts does not owe the cluster a full scan at once.
    const full = ++this.passes % (this.opts.fullSweepEvery ?? FULL_SWEEP_EVERY) === 0;
    const slots = full ? Array.from({ length: SLOTS }, (_, i) => i) : (await this.redis.smembers(this.k.reapSlots())).map(Number);
    for (let i = 0; i < slots.length; i += SLOT_BATCH) {
      const batch = slots.slice(i, i + SLOT_BATCH);
      // One command per slot index, auto-pipelined: in a cluster each goes to the node owning the slot.
      const firsts = await Promise.all(batch.map((slot) => this.redis.zrange(this.k.reapIndexOfSlot(slot), 0, 0, 'WITHSCORES')));
      for (let j = 0; j < batch.length; j++) {
        const slot = batch[j] as number;
        const first = firsts[j] ?? [];
        if (first[1] === undefined) {
          if (!full) await this.redis.srem(this.k.reapSlots(), String(slot));
          continue;
        }
        if (full) await this.redis.sadd(this.k.reapSlots(), String(slot));
        if (Number(first[1]) <= now) await this.reapSlot(slot, now, total);
      }
    }
    return total;
  }

  /** Reaps every account of one slot's index whose earliest deadline has passed. */
  private async reapSlot(slot: number, now: number, total: ReapResult): Promise<void> {
    const visited = new Set<string>();
    for (;;) {
      const due = await this.redis.zrangebyscore(this.k.reapIndexOfSlot(slot), '-inf', now, 'LIMIT', 0, REAP_ACCOUNTS_BATCH);
      const fresh = due.filter((a) => !visited.has(a));
      if (fresh.length === 0) return;
      for (const accountId of fresh) {
        visited.add(accountId);
        await this.reapAccount(accountId, now, total);
      }
    }
  }

  /**
   * Reaps one account's due holds (adding them to `total`), then re-files the account in the index by
   * its next deadline.
   */
  private async reapAccount(accountId: string, now: number, total: ReapResult): Promise<void> {
    const a = accountId;
    let next = -1;
    for (;;) {
      const rids = await this.redis.zrangebyscore(this.k.holds(a), '-inf', now, 'LIMIT', 0, REAP_BATCH);
      if (rids.length === 0) {
        const first = await this.redis.zrange(this.k.holds(a), 0, 0, 'WITHSCORES');
        next = first[1] === undefined ? -1 : Number(first[1]);
        break;
      }
      const keyIds = (await Promise.all(rids.map((rid) => this.redis.hget(this.k.hold(a, rid), 'keyId')))).map((v) => v ?? '');
      const own = [this.k.account(a), this.k.holds(a)];
      const args: string[] = [String(now), String(this.opts.markerTtlSeconds), String(rids.length)];
      const hashKeys = new Set<string>();
      rids.forEach((rid, i) => {
        const keyId = keyIds[i] ?? '';
        // What the hold drew from, if it does not remember it itself (one taken before holds did).
        const described = this.describe(a, { keyId });
        own.push(this.k.hold(a, rid), this.k.reaped(a, rid));
        args.push(rid, keyId, described.held);
        for (const key of described.hashKeys) hashKeys.add(key);
      });
      const keys = withHashKeys(own, [...hashKeys]);
      const [n, nextDeadline, released] = await this.scripts.run<[number, number, number]>('reap', keys, args);
      total.count += n;
      total.released += released;
      next = nextDeadline;
      if (rids.length < REAP_BATCH) break;
    }
    // Re-file the account: by its next deadline, or out of the index. A reserve that lands between the
    // script and this update is caught by the re-read below (its own ZADD LT may have come earlier).
    const index = this.k.reapIndex(a);
    if (next >= 0) await this.redis.zadd(index, next, a);
    else await this.redis.zrem(index, a);
    const first = await this.redis.zrange(this.k.holds(a), 0, 0, 'WITHSCORES');
    if (first[1] !== undefined) await this.redis.zadd(index, 'LT', Number(first[1]), a);
  }

  /**
   * Sums `held` and the hold count of every account in the reaper indexes of the announced slots. Every
   * account with a hold is there (the reserve script adds it), plus some with none left (they add 0).
   * No ledger-wide counter is kept instead: the per-account scripts cannot write a global key and stay
   * valid in Redis Cluster, and a command pipelined beside them cannot know whether the script admitted
   * the hold or what a (duplicate, late) settlement released, so such a counter would drift. The cost is
   * one ZSCAN step per 500 accounts holding money and two O(1) reads per account, per reaper tick, all
   * off the request path. Not a snapshot: a hold made or settled during the scan may be seen or not.
   */
  async holdsSummary(): Promise<HoldsSummary> {
    // ZSCAN may return an entry twice (while the set is rehashed); each account is summed once.
    const seen = new Set<string>();
    let count = 0;
    let held = 0;
    for (const slot of await this.redis.smembers(this.k.reapSlots())) {
      const part = await this.sumIndex(this.k.reapIndexOfSlot(Number(slot)), seen);
      count += part.count;
      held += part.held;
    }
    return { count, held };
  }

  private async sumIndex(index: string, seen: Set<string>): Promise<HoldsSummary> {
    let count = 0;
    let held = 0;
    let cursor = '0';
    do {
      const [next, flat] = await this.redis.zscan(index, cursor, 'COUNT', HOLDS_SCAN_PAGE);
      cursor = next;
      const accounts: string[] = [];
      // Member, score, member, score, ...
      for (let i = 0; i < flat.length; i += 2) {
        const a = flat[i];
        if (a !== undefined && !seen.has(a)) {
          seen.add(a);
          accounts.push(a);
        }
      }
      if (accounts.length === 0) continue;
      // Plain commands, auto-pipelined: an explicit pipeline could not span the accounts' slots in a cluster.
      const replies = await Promise.all(accounts.map((a) => Promise.all([this.redis.hget(this.k.account(a), 'held'), this.redis.zcard(this.k.holds(a))])));
      for (const [h, n] of replies) {
        held += Number(h ?? 0);
        count += n;
      }
    } while (cursor !== '0');
    return { count, held };
  }

  async credit(accountId: string, amount: number, idempotencyKey: string): Promise<boolean> {
    checkPositiveAmount(amount, 'credit amount');
    if (!idempotencyKey) throw new Error('credit needs an idempotency key');
    const r = await this.scripts.run<number>(
      'credit',
      [this.k.account(accountId), this.k.credit(accountId, idempotencyKey)],
      [String(amount), String(this.opts.now())],
    );
    if (r === -1) throw new Error(`unknown account ${accountId}`);
    if (r === -2) throw new RangeError('credit would take the balance past the largest exact amount');
    if (r === -3) throw new CreditConflictError(idempotencyKey);
    return r === 1;
  }

  async refund(accountId: string, requestId: string): Promise<RefundOutcome> {
    const r = await this.scripts.run<number>(
      'refund',
      [this.k.account(accountId), this.k.settled(accountId, requestId), this.k.usage(accountId)],
      [requestId, String(this.opts.now())],
    );
    return { refunded: r > 0 ? r : 0, unknown: r === -1, duplicate: r === -2 };
  }

  async balance(accountId: string): Promise<AccountBalance> {
    const [balance, held] = await this.redis.hmget(this.k.account(accountId), 'balance', 'held');
    return { balance: Number(balance ?? 0), held: Number(held ?? 0) };
  }

  keySpend(accountId: string, keyId: string, nowArg?: number): Promise<KeySpend> {
    return this.spendAt(accountId, SCOPED.key(keyId), nowArg);
  }

  scopeSpend(accountId: string, scope: BudgetScope, id: string, nowArg?: number): Promise<KeySpend> {
    return this.spendAt(accountId, SCOPED[scope](id), nowArg);
  }

  async moneyStanding(accountId: string, path: BucketPath, nowArg?: number): Promise<MoneyStanding[]> {
    const month = utcMonth(nowArg ?? this.opts.now());
    const at = (name: string): string => this.k.scoped(accountId, name);
    // Plain reads (auto-pipelined): each bucket's own hash, with its limit where it is kept.
    return Promise.all(
      bucketsOf(path).flatMap((b) => {
        switch (b.kind) {
          case 'balance':
            return [this.redis.hmget(at(b.at), b.funds, b.held).then(([funds, held]) => ({ reason: b.reason, limit: Number(funds ?? 0), used: Number(held ?? 0) }))];
          case 'cap': {
            const source = b.limit[0];
            const fields = [fieldFor(b, 'spent', month), fieldFor(b, 'held', month)];
            return [
              Promise.all([this.redis.hmget(at(b.at), ...fields), source === undefined ? Promise.resolve(null) : this.redis.hget(at(source.at), source.field)]).then(([[spent, held], limit]) => ({
                reason: b.reason,
                limit: limit === null || limit === undefined ? undefined : Number(limit),
                used: Number(spent ?? 0) + Number(held ?? 0),
              })),
            ];
          }
          default:
            return [];
        }
      }),
    );
  }

  /** The spend and holds kept in one hash of the account (a key's, a team's, a member's). */
  private async spendAt(accountId: string, at: string, nowArg?: number): Promise<KeySpend> {
    const month = utcMonth(nowArg ?? this.opts.now());
    const f = KEY_SPEND_FIELDS;
    const v = await this.redis.hmget(this.k.scoped(accountId, at), f.lifetimeSpent, f.lifetimeHeld, f.monthSpent(month), f.monthHeld(month));
    return {
      lifetimeSpent: Number(v[0] ?? 0),
      lifetimeHeld: Number(v[1] ?? 0),
      monthSpent: Number(v[2] ?? 0),
      monthHeld: Number(v[3] ?? 0),
    };
  }

  /** Newest first. Refund records are newer than what they refund, so a backwards scan sees them first. */
  async listUsage(accountId: string, opts: { keyId?: string; limit?: number } = {}): Promise<UsageRecord[]> {
    const limit = opts.limit ?? 100;
    const out: UsageRecord[] = [];
    const refunded = new Set<string>();
    let end = '+';
    while (out.length < limit) {
      const page = await this.redis.xrevrange(this.k.usage(accountId), end, '-', 'COUNT', USAGE_PAGE);
      for (const [, flat] of page) {
        const f: Record<string, string> = {};
        for (let i = 0; i + 1 < flat.length; i += 2) f[flat[i] as string] = flat[i + 1] as string;
        if (f.t === 'r') {
          if (f.rid) refunded.add(f.rid);
          continue;
        }
        if (opts.keyId !== undefined && f.key !== opts.keyId) continue;
        const rec = usageFromFields(accountId, f);
        if (refunded.has(rec.requestId)) rec.refunded = true;
        out.push(rec);
        if (out.length === limit) break;
      }
      if (page.length < USAGE_PAGE) break;
      end = `(${page[page.length - 1]?.[0] ?? '0-0'}`;
    }
    return out;
  }

  async audit(accountId: string): Promise<AuditReport> {
    const [credited, refunded, balance, usageTotal, holds] = await this.scripts.run<number[]>(
      'audit',
      [this.k.account(accountId), this.k.usage(accountId), this.k.holds(accountId)],
      [],
    );
    const drawnDown = Number(credited) + Number(refunded) - Number(balance);
    return {
      accountId,
      credited: Number(credited),
      refunded: Number(refunded),
      balance: Number(balance),
      drawnDown,
      usageTotal: Number(usageTotal),
      difference: drawnDown - Number(usageTotal),
      holdsOutstanding: Number(holds),
    };
  }

  /** The caller owns the Redis connection. */
  async close(): Promise<void> {}
}
