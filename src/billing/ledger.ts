// The ledger: where money is held and moved. Every operation on one account is atomic
// (one Lua script in Redis; one synchronous step in memory), and every amount is integer micro-USD.
import type { RequestDetail } from './request-detail.js';
import type { Micros } from '../catalog/snapshot.js';
import type { BudgetScope, LimitReason, RefusalReason } from '../limits/limits.js';
import type { BucketPath } from './buckets.js';

export type { Micros };

export type { BudgetScope, RateLimitReason, RefusalReason } from '../limits/limits.js';
export { isRateLimitReason } from '../limits/limits.js';

/**
 * A key's rate-limit state as the reservation left it (what the answer's rate-limit headers say). A limit
 * that is not set is undefined.
 */
export interface RateLimitState {
  requests?: { limit: number; remaining: number };
  tokens?: { limit: number; remaining: number };
  concurrency?: { limit: number; inFlight: number };
  /** Milliseconds until the request and token window starts again. */
  resetMs: number;
}

export interface ReservationRequest {
  requestId: string;
  accountId: string;
  keyId: string;
  /** The key's team: its budgets are on the request's path (buckets.ts, BucketPath). */
  teamId?: string;
  /** The member who owns the key: their budgets are on the request's path. */
  memberId?: string;
  /** Worst-case cost of the request. */
  amount: Micros;
  /** The hold is returned by the reaper once this many ms have passed without settlement. */
  holdTtlMs: number;
  /** Unix ms; defaults to the clock. Tests pass it to cross month boundaries. */
  now?: number;
  /** The model asked for: what the journal's record of a refusal names. */
  model?: string;
  /** Tokens counted against the key's token limit: the worst case (input bound + output limit). */
  rateLimitTokens?: number;
  /** The length of the rate limits' window in ms (default 60,000: per minute). */
  rateLimitWindowMs?: number;
}

export type ReservationOutcome =
  | {
      admitted: true;
      /**
       * The generation of the hot path's copy of the account that took the hold (a Redis seeded from the
       * record). The hot path keeps it with the hold until it settles, so a hold lost with a wiped Redis
       * is told from a repeat.
       */
      generation?: string;
      /** The key's rate limits after this request was counted; absent when the key has none. */
      rateLimit?: RateLimitState;
    }
  | {
      admitted: false;
      /** The key's rate limits as they stood (absent for unknown or revoked keys, or none set). */
      rateLimit?: RateLimitState;
      /**
       * The limit that refused (src/limits/limits.ts; admission.ts has the rule): of the limits of money
       * (the account balance, the key's lifetime and monthly caps), the one with the least left, the first
       * declared on a tie. Money is checked first; an affordable request can still be refused by a rate
       * limit, then by the first unit (requests, tokens, requests in flight) it does not fit in.
       */
      reason: RefusalReason;
      /** Micro-USD; for a rate-limit refusal, the requests or tokens the request needed. */
      needed: Micros;
      /** What that limit has left (never negative); requests or tokens for a rate-limit refusal. */
      available: Micros;
      /**
       * The smallest of all three limits' remainders: what any request could still reserve. For a refusal
       * by a limit it equals `available`; it is kept apart because revoked and unknown keys report 0.
       */
      availableOverall: Micros;
      /** The binding limit's value (micro-USD for money), when it has one. */
      limit?: number;
      /** The name of the binding limit's scope (a team's) and of the account, when the hot path has them: what the refusal names. */
      scopeName?: string;
      accountName?: string;
    };

export interface TokenUsage {
  /** Every prompt token: uncached, read from a prompt cache and written to one. */
  input: number;
  output: number;
  /** Input tokens read from a prompt cache (a subset of `input`). */
  cachedInput: number;
  /** Input tokens written to a prompt cache kept 5 minutes (a subset of `input`, apart from the others); absent is 0. */
  cacheWrite5m?: number;
  /** Input tokens written to a prompt cache kept 1 hour (a subset of `input`, apart from the others); absent is 0. */
  cacheWrite1h?: number;
  /** Output tokens spent reasoning (a subset of `output`). */
  reasoning: number;
}

/**
 * How a request ended: answered in full; the client gone first; the upstream failed (refused before
 * accepting, or broke off after); the gateway's request deadline or its shutdown's drain bound ended it;
 * refused by the ledger. The charge does not follow from it: see the exchange's settlement.
 */
export type RequestStatus = 'completed' | 'client_cancelled' | 'upstream_failed' | 'timed_out' | 'shutdown_cut' | 'refused';

/** Who and what a request was: shared by the settlement, the usage record and the journal's entry. */
export interface RequestOfRecord {
  requestId: string;
  accountId: string;
  keyId: string;
  /** The team the request is charged to besides its key (the key's team when it was reserved). */
  teamId?: string;
  /** The member (the key's owner) it is charged to. */
  memberId?: string;
  model: string;
  usage: TokenUsage;
  status: RequestStatus;
  latencyMs: number;
  /** What the usage record keeps beyond money: status, finish reason, upstream, refusal, first token. */
  detail?: RequestDetail;
}

export interface SettlementRequest extends RequestOfRecord {
  /** Actual cost computed from usage and the model's prices; the ledger charges min(cost, held). */
  cost: Micros;
  now?: number;
}

export interface SettlementOutcome {
  /** What was drawn from the balance. */
  charged: Micros;
  /** What went back to the balance and caps from the hold. */
  released: Micros;
  /** The request id was already settled: nothing changed. */
  duplicate: boolean;
  /** The hold had expired and was reaped before this settlement arrived. */
  late: boolean;
  /** Set when this call applied the settlement (not on a duplicate): what the journal records. */
  journal?: JournalMark;
}

/** What a settlement adds to the usage record beyond its request: for the journal to PostgreSQL. */
export interface JournalMark {
  /** The generation of the hot path's copy of the account that applied the settlement. */
  generation?: string;
  /** The entry's id in the account's Redis journal stream; absent for the memory ledger. */
  entryId?: string;
  /** The billing month (UTC, YYYY-MM) of the hold: the month whose cap the charge counts against. */
  month: string;
  /** What the hold had reserved (for a late settlement, what the reaped hold had). */
  reserved: Micros;
  /** Unix ms of the settlement. */
  time: number;
  /** The account's seq after this settlement (a Redis hot path; see lua/common.lua). */
  seq?: number;
}

export interface UsageRecord extends RequestOfRecord {
  /** What was actually charged (micro-USD). */
  cost: Micros;
  /** Unix ms of settlement. */
  time: number;
  /** Set when this charge was later refunded. */
  refunded?: boolean;
}

export interface RefundOutcome {
  /** What went back to the balance: 0 when the request was charged nothing, or on a repeat. */
  refunded: Micros;
  /** No settled request has this id on the account (never settled, or its marker has expired). */
  unknown: boolean;
  /** The request was refunded before; nothing changed. */
  duplicate: boolean;
}

export interface AccountBalance {
  /** Money on the account (credits less charges). */
  balance: Micros;
  /** Part of `balance` held by requests in flight. */
  held: Micros;
}

/** One limit of money as it stands (Ledger.moneyStanding). */
export interface MoneyStanding {
  reason: LimitReason;
  /** The limit in force (for the balance, the money on the account); undefined when none is set. */
  limit: Micros | undefined;
  /** Spent (this month, for a monthly one) and held against it. */
  used: Micros;
}

export interface KeySpend {
  lifetimeSpent: Micros;
  lifetimeHeld: Micros;
  /** Spend and holds of the calendar month (UTC) of `now`. */
  monthSpent: Micros;
  monthHeld: Micros;
}

export interface AuditReport {
  accountId: string;
  credited: Micros;
  refunded: Micros;
  balance: Micros;
  /** credited + refunded - balance. */
  drawnDown: Micros;
  /** Sum of the cost of every usage record. */
  usageTotal: Micros;
  /** drawnDown - usageTotal; zero when the books agree. */
  difference: Micros;
  holdsOutstanding: number;
}

/** Holds in flight across the whole ledger (every account), as one sample. */
export interface HoldsSummary {
  /** Holds reserved and neither settled nor returned yet. */
  count: number;
  /** Micro-USD those holds keep from balances. */
  held: Micros;
}

/** What one reaper pass returned. */
export interface ReapResult {
  /** Expired holds returned. */
  count: number;
  /** Micro-USD those holds released back to balances and caps. */
  released: Micros;
}

export interface Ledger {
  reserve(req: ReservationRequest): Promise<ReservationOutcome>;
  /** Charge min(cost, held), release the rest, append the usage record. Exactly once per request id. */
  settle(req: SettlementRequest): Promise<SettlementOutcome>;
  /** Return every hold whose deadline has passed: how many, and the micro-USD they released. */
  reap(now?: number): Promise<ReapResult>;
  /** `reap(now)`, counting only the holds. */
  reapExpired(now?: number): Promise<number>;
  /** Every outstanding hold, ledger-wide: a read-only scan the reaper samples for the holds gauges. */
  holdsSummary(): Promise<HoldsSummary>;
  /**
   * Add a top-up. A repeated idempotency key with the same amount is a no-op that returns false; with a
   * different amount it throws CreditConflictError.
   */
  credit(accountId: string, amount: Micros, idempotencyKey: string): Promise<boolean>;
  /** Credit back the charge of one settled request, once. */
  refund(accountId: string, requestId: string): Promise<RefundOutcome>;
  balance(accountId: string): Promise<AccountBalance>;
  keySpend(accountId: string, keyId: string, now?: number): Promise<KeySpend>;
  /** A team's or a member's spend, counted like a key's (a member's is the spend of the keys they own). */
  scopeSpend(accountId: string, scope: BudgetScope, id: string, now?: number): Promise<KeySpend>;
  /**
   * Every limit of money on a request path as it stands now, in declaration order (the balance, the
   * team's and the member's budgets, the key's caps): its value (none for a budget or cap not set) and
   * what is spent and held against it. Reads only.
   */
  moneyStanding(accountId: string, path: BucketPath, now?: number): Promise<MoneyStanding[]>;
  /** Newest first; filtered to one key when keyId is given. */
  listUsage(accountId: string, opts?: { keyId?: string; limit?: number }): Promise<UsageRecord[]>;
  audit(accountId: string): Promise<AuditReport>;
  close(): Promise<void>;
}

/**
 * An account's money as the record has it, for a hot path that lost it (a wiped or new Redis): loaded
 * once per generation, stamped with the record's snapshot so that settlements committed after it are
 * still applied, and held shut for `windowMs` while other gateways' uncommitted settlements arrive.
 */
export interface AccountSeed {
  accountId: string;
  generation: string;
  /** pg_current_snapshot() of the read, as text. */
  snapshot: string;
  windowMs: number;
  balance: Micros;
  /** Credits less reversals and dispute holds. */
  credited: Micros;
  refunded: Micros;
  charged: Micros;
  /** The month (UTC, YYYY-MM) `keys[].monthSpent` is for. */
  month: string;
  keys: Array<{ keyId: string; lifetimeSpent: Micros; monthSpent: Micros }>;
  /** Every team of the account with its spend (0 for none): the seed replaces what the hot path has of it. */
  teams: Array<{ id: string; lifetimeSpent: Micros; monthSpent: Micros }>;
  /** Every member who owns a key of the account, with the spend of their keys. */
  members: Array<{ id: string; lifetimeSpent: Micros; monthSpent: Micros }>;
  /** The highest seq of the account's hot path the record has seen (committed settlements, applied movements). */
  recordSeq: number;
  /** The token of the reload this read was taken under (SeededLedger.beginSeed). */
  reload: string;
}

/**
 * What loading a read of the record did: loaded it; found the account loaded already (by another
 * gateway); or refused it as too old (what the account was told of since the read began may be missing
 * from it): the caller reads the record again.
 */
export type SeedOutcome = 'seeded' | 'loaded already' | 'read again';

/** A hot path whose accounts are loaded from the record before use (the Redis ledger with a record). */
export interface SeededLedger {
  /**
   * From now on accounts without a generation are refused until seeded: with a loader, each refused
   * call asks it to make the account ready and is tried again; without one it throws
   * AccountNotSeededError (or AccountRebuildingError while a reload's window is open).
   */
  requireSeeding(loader?: AccountLoader): void;
  /**
   * Begins a reload of the account, before the record is read: the token the read is taken under, or
   * undefined when the account is loaded already (nothing to read).
   */
  beginSeed(accountId: string): Promise<string | undefined>;
  /** Loads the read unless the account was loaded meanwhile, or the read is too old (see SeedOutcome). */
  seedAccount(seed: AccountSeed): Promise<SeedOutcome>;
}

/**
 * What a seeded hot path asks when an account is not ready: load it from the record, or wait out its
 * rebuild window, before the next attempt; or throw, which fails the call.
 */
export interface AccountLoader {
  /** `attempt`: 1 for the call's first refusal, 2 for its second, and so on. */
  ready(err: AccountNotSeededError | AccountRebuildingError, attempt: number): Promise<void>;
}

export function isSeededLedger(ledger: object): ledger is SeededLedger {
  const l = ledger as Partial<SeededLedger>;
  return typeof l.seedAccount === 'function' && typeof l.beginSeed === 'function' && typeof l.requireSeeding === 'function';
}

/**
 * A hot path that keeps a copy of each settlement until a journal writer has taken it to the record (the
 * Redis ledger's journal stream). Off until asked: without a writer the copies would never be removed.
 */
export interface JournalingLedger {
  /**
   * From now on settlements carry their journal mark, and, when a sink is given, each one applied and
   * each reservation refused is handed to it (the last sink given takes them all; none given keeps it).
   */
  journalSettlements(sink?: JournalSink): void;
}

/**
 * Where a journaling hot path hands what it applied, in the same step as it reads its own reply: the
 * journal costs the request path no promise of its own (each was ~0.4 KB of garbage per call, paid for
 * in scavenges). Called synchronously; must not throw.
 */
export interface JournalSink {
  /** A settlement the hot path applied (not a repeat). */
  settled(req: SettlementRequest, outcome: SettlementOutcome): void;
  /** A reservation the hot path refused. */
  refused(req: ReservationRequest, reason: RefusalReason): void;
}

export function isJournalingLedger(ledger: object): ledger is JournalingLedger {
  return typeof (ledger as Partial<JournalingLedger>).journalSettlements === 'function';
}

/** A movement of money the record (PostgreSQL) committed first, as the hot path applies it. */
export interface HotMovement {
  accountId: string;
  /** Signed micro-USD: money in > 0, money taken back < 0. */
  amount: Micros;
  /** The record's idempotency key: the hot path applies a key once. */
  idempotencyKey: string;
  /** The audit figure the movement moves with the balance: money in (or taken back), or a refund. */
  counts: 'credited' | 'refunded';
  /** The record's transaction that committed it (xid8 text): a seed read after it has counted it. */
  recordTx: string;
}

/** A hot path that takes movements committed to the record (memory and Redis ledgers). */
export interface HotPathMovements {
  /**
   * Applies the movement once per idempotency key: true when this call applied it; false when it was
   * applied before, or when the account's seed already counted it. AccountNotSeededError when the account
   * is not loaded (its seed will count it); CreditConflictError when the key was applied with another
   * amount; RangeError past the largest exact balance.
   */
  applyMovement(m: HotMovement): Promise<boolean>;
}

export function hasHotPathMovements(ledger: object): ledger is HotPathMovements {
  return typeof (ledger as Partial<HotPathMovements>).applyMovement === 'function';
}

/** The hot path does not hold the account's money (never loaded, or wiped): seed it and try again. */
export class AccountNotSeededError extends Error {
  readonly notALedgerFault = true as const;
  constructor(readonly accountId: string) {
    super(`account ${accountId} is not loaded in the hot path`);
    this.name = 'AccountNotSeededError';
  }
}

/** The account was just loaded again after a wipe: reservations wait `retryAfterMs` (see AccountSeed). */
export class AccountRebuildingError extends Error {
  readonly notALedgerFault = true as const;
  constructor(
    readonly accountId: string,
    readonly retryAfterMs: number,
  ) {
    super(`account ${accountId} is being rebuilt from the record; retry in ${retryAfterMs} ms`);
    this.name = 'AccountRebuildingError';
  }
}
