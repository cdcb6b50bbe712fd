// The ledger in process memory. Each method does its work synchronously before its first await, so
// concurrent calls never interleave inside one: the same atomicity the Lua scripts have in Redis.
import type {
  AccountBalance,
  AuditReport,
  HoldsSummary,
  HotMovement,
  HotPathMovements,
  KeySpend,
  JournalingLedger,
  JournalSink,
  Ledger,
  ReapResult,
  RefundOutcome,
  RateLimitState,
  RefusalReason,
  ReservationOutcome,
  ReservationRequest,
  SettlementOutcome,
  SettlementRequest,
  UsageRecord,
} from './ledger.js';
import { checkPositiveAmount, CreditConflictError, checkReservation, checkSettlement, trimThreshold } from './ledger-common.js';
import type { MemoryAccount, MemoryHold, MemoryKey, MemoryRateCount, MemoryState } from './memory-state.js';
import { effectiveRateLimits, type RateLimits } from '../accounts/rate-limits.js';
import { DEFAULT_RATE_LIMIT_WINDOW_MS, rateLimitedTokens } from './rate-limit-state.js';
import { utcMonth } from './month.js';

const get = (m: Map<string, number>, k: string): number => m.get(k) ?? 0;
const add = (m: Map<string, number>, k: string, d: number): void => {
  m.set(k, get(m, k) + d);
};
const nonNeg = (v: number): number => (v < 0 ? 0 : v);

/** The key's rate-limit state for the answer's headers (as rateLimitStateOf reads reserve.lua's). */
function memoryRateState(limits: RateLimits, count: MemoryRateCount, resetMs: number): RateLimitState | undefined {
  const state: RateLimitState = { resetMs };
  const { requestsPerMinute: rpm, tokensPerMinute: tpm, concurrentRequests: conc } = limits;
  if (rpm !== undefined) state.requests = { limit: rpm, remaining: nonNeg(rpm - count.requests) };
  if (tpm !== undefined) state.tokens = { limit: tpm, remaining: nonNeg(tpm - count.tokens) };
  if (conc !== undefined) state.concurrency = { limit: conc, inFlight: count.inFlight.size };
  return rpm === undefined && tpm === undefined && conc === undefined ? undefined : state;
}

export interface MemoryLedgerOptions {
  usageMaxRecords: number;
  now: () => number;
}

export class MemoryLedger implements Ledger, JournalingLedger, HotPathMovements {
  /** Like the Redis ledger: a settlement's journal mark is returned once a journal writer takes them. */
  private journaling = false;
  /** The journal writer's intake (see JournalSink). */
  private sink: JournalSink | undefined;

  constructor(
    private readonly state: MemoryState,
    private readonly opts: MemoryLedgerOptions,
  ) {}

  journalSettlements(sink?: JournalSink): void {
    this.journaling = true;
    if (sink !== undefined) this.sink = sink;
  }

  async reserve(req: ReservationRequest): Promise<ReservationOutcome> {
    const outcome = this.decide(req);
    if (!outcome.admitted) this.sink?.refused(req, outcome.reason);
    return outcome;
  }

  /** Admits (and holds) or refuses, synchronously: nothing can interleave. */
  private decide(req: ReservationRequest): ReservationOutcome {
    checkReservation(req);
    const now = req.now ?? this.opts.now();
    const month = utcMonth(now);
    const amount = req.amount;
    const acct = this.state.accounts.get(req.accountId);
    if (acct?.holds.has(req.requestId)) return { admitted: true };
    const key = acct?.keys.get(req.keyId);
    if (!acct || !key) return { admitted: false, reason: 'unknown_key', needed: amount, available: 0, availableOverall: 0 };
    if (key.record.revokedAt !== undefined) {
      return { admitted: false, reason: 'key_revoked', needed: amount, available: 0, availableOverall: 0 };
    }
    // The binding limit is the one with the least left (ties: balance, lifetime cap, monthly cap), as in reserve.lua.
    let reason: RefusalReason = 'insufficient_balance';
    let left = nonNeg(acct.balance - acct.held);
    if (key.record.lifetimeCap !== undefined) {
      const lifetimeLeft = nonNeg(key.record.lifetimeCap - key.lifetimeSpent - key.lifetimeHeld);
      if (lifetimeLeft < left) {
        reason = 'key_lifetime_cap_reached';
        left = lifetimeLeft;
      }
    }
    if (key.record.monthlyCap !== undefined) {
      const monthLeft = nonNeg(key.record.monthlyCap - get(key.monthSpent, month) - get(key.monthHeld, month));
      if (monthLeft < left) {
        reason = 'key_monthly_cap_reached';
        left = monthLeft;
      }
    }
    // Rate limits as in reserve.lua: the key's own, else the account's default; fixed windows.
    const limits = effectiveRateLimits(key.record.rateLimits, acct.account.rateLimits);
    const windowMs = req.rateLimitWindowMs ?? DEFAULT_RATE_LIMIT_WINDOW_MS;
    const win = Math.floor(now / windowMs);
    const deadline = now + req.holdTtlMs;
    let count = acct.rate.get(req.keyId);
    if (count === undefined) {
      count = { window: win, requests: 0, tokens: 0, inFlight: new Map() };
      acct.rate.set(req.keyId, count);
    }
    if (count.window !== win) Object.assign(count, { window: win, requests: 0, tokens: 0 });
    for (const [rid, due] of count.inFlight) if (due <= now) count.inFlight.delete(rid);
    const tokens = req.rateLimitTokens ?? 0;
    const state = (): RateLimitState | undefined => memoryRateState(limits, count, (win + 1) * windowMs - now);
    const refuse = (r: RefusalReason, needed: number, available: number, overall: number): ReservationOutcome => {
      const rateLimit = state();
      return { admitted: false, reason: r, needed, available, availableOverall: overall, ...(rateLimit === undefined ? {} : { rateLimit }) };
    };
    if (amount > left) return refuse(reason, amount, left, left);
    const { requestsPerMinute: rpm, tokensPerMinute: tpm, concurrentRequests: conc } = limits;
    if (rpm !== undefined && count.requests + 1 > rpm) return refuse('rate_limit_requests', 1, nonNeg(rpm - count.requests), left);
    if (tpm !== undefined && count.tokens + tokens > tpm) return refuse('rate_limit_tokens', tokens, nonNeg(tpm - count.tokens), left);
    if (conc !== undefined && count.inFlight.size + 1 > conc) return refuse('rate_limit_concurrency', 1, nonNeg(conc - count.inFlight.size), left);
    const hold: MemoryHold = { amount, keyId: req.keyId, month, deadline };
    if (rpm !== undefined || tpm !== undefined) {
      count.requests += 1;
      count.tokens += tokens;
    }
    if (tpm !== undefined) Object.assign(hold, { rateWindow: win, rateTokens: tokens });
    if (conc !== undefined) count.inFlight.set(req.requestId, deadline);
    acct.held += amount;
    key.lifetimeHeld += amount;
    add(key.monthHeld, month, amount);
    acct.holds.set(req.requestId, hold);
    const rateLimit = state();
    return { admitted: true, ...(rateLimit === undefined ? {} : { rateLimit }) };
  }

  async settle(req: SettlementRequest): Promise<SettlementOutcome> {
    checkSettlement(req);
    const duplicate: SettlementOutcome = { charged: 0, released: 0, duplicate: true, late: false };
    const acct = this.state.accounts.get(req.accountId);
    if (!acct || acct.settled.has(req.requestId)) return duplicate;
    const hold = acct.holds.get(req.requestId);
    const count = acct.rate.get(req.keyId);
    count?.inFlight.delete(req.requestId);
    // The token window counted the worst case: the unused part goes back while the window lasts.
    if (hold?.rateWindow !== undefined && count !== undefined && count.window === hold.rateWindow) {
      count.tokens = nonNeg(count.tokens - nonNeg((hold.rateTokens ?? 0) - rateLimitedTokens(req.usage)));
    }
    let charge: number;
    let released = 0;
    let late = false;
    let month: string;
    let reserved: number;
    let key: MemoryKey | undefined;
    if (hold) {
      if (hold.keyId !== req.keyId) throw new Error('hold belongs to another key');
      key = acct.keys.get(hold.keyId);
      month = hold.month;
      reserved = hold.amount;
      charge = Math.min(req.cost, hold.amount);
      released = hold.amount - charge;
      acct.held -= hold.amount;
      acct.balance -= charge;
      if (key) {
        key.lifetimeHeld -= hold.amount;
        add(key.monthHeld, month, -hold.amount);
      }
      acct.holds.delete(req.requestId);
    } else {
      const reaped = acct.reaped.get(req.requestId);
      if (!reaped) return duplicate;
      if (reaped.keyId !== req.keyId) throw new Error('reaped hold belongs to another key');
      key = acct.keys.get(reaped.keyId);
      month = reaped.month;
      reserved = reaped.amount;
      late = true;
      // The hold is gone, so other requests may have used its room: take only what is still free.
      charge = Math.min(req.cost, reaped.amount, acct.balance - acct.held);
      if (key?.record.lifetimeCap !== undefined) {
        charge = Math.min(charge, key.record.lifetimeCap - key.lifetimeSpent - key.lifetimeHeld);
      }
      if (key?.record.monthlyCap !== undefined) {
        charge = Math.min(charge, key.record.monthlyCap - get(key.monthSpent, month) - get(key.monthHeld, month));
      }
      charge = nonNeg(charge);
      acct.balance -= charge;
      acct.reaped.delete(req.requestId);
    }
    if (key) {
      key.lifetimeSpent += charge;
      add(key.monthSpent, month, charge);
    }
    acct.settled.set(req.requestId, { charged: charge, keyId: req.keyId, refunded: false });
    const time = req.now ?? this.opts.now();
    acct.usage.push({
      kind: 'usage',
      record: {
        requestId: req.requestId,
        accountId: req.accountId,
        keyId: req.keyId,
        model: req.model,
        usage: { ...req.usage },
        cost: charge,
        status: req.status,
        latencyMs: Math.max(0, Math.round(req.latencyMs)),
        time,
      },
    });
    this.trim(acct);
    if (!this.journaling) return { charged: charge, released, duplicate: false, late };
    const outcome: SettlementOutcome = { charged: charge, released, duplicate: false, late, journal: { month, reserved, time } };
    this.sink?.settled(req, outcome);
    return outcome;
  }

  private trim(acct: MemoryAccount): void {
    const max = this.opts.usageMaxRecords;
    if (acct.usage.length <= trimThreshold(max)) return;
    const removed = acct.usage.splice(0, acct.usage.length - max);
    for (const e of removed) if (e.kind === 'usage') acct.usageArchived += e.record.cost;
  }

  async reapExpired(nowArg?: number): Promise<number> {
    return (await this.reap(nowArg)).count;
  }

  async reap(nowArg?: number): Promise<ReapResult> {
    const now = nowArg ?? this.opts.now();
    let count = 0;
    let released = 0;
    for (const acct of this.state.accounts.values()) {
      for (const [rid, hold] of acct.holds) {
        if (hold.deadline > now) continue;
        acct.held -= hold.amount;
        const key = acct.keys.get(hold.keyId);
        if (key) {
          key.lifetimeHeld -= hold.amount;
          add(key.monthHeld, hold.month, -hold.amount);
        }
        acct.reaped.set(rid, { amount: hold.amount, keyId: hold.keyId, month: hold.month });
        acct.holds.delete(rid);
        count++;
        released += hold.amount;
      }
    }
    return { count, released };
  }

  async holdsSummary(): Promise<HoldsSummary> {
    let count = 0;
    let held = 0;
    for (const acct of this.state.accounts.values()) {
      count += acct.holds.size;
      held += acct.held;
    }
    return { count, held };
  }

  async credit(accountId: string, amount: number, idempotencyKey: string): Promise<boolean> {
    checkPositiveAmount(amount, 'credit amount');
    if (!idempotencyKey) throw new Error('credit needs an idempotency key');
    const acct = this.state.accounts.get(accountId);
    if (!acct) throw new Error(`unknown account ${accountId}`);
    const previous = acct.credits.get(idempotencyKey);
    if (previous !== undefined) {
      if (previous !== amount) throw new CreditConflictError(idempotencyKey);
      return false;
    }
    if (acct.balance + amount > Number.MAX_SAFE_INTEGER) {
      throw new RangeError('credit would take the balance past the largest exact amount');
    }
    acct.credits.set(idempotencyKey, amount);
    acct.balance += amount;
    acct.credited += amount;
    return true;
  }

  /** A movement the record committed: once per idempotency key (the credits' keys, as in Redis). */
  async applyMovement(m: HotMovement): Promise<boolean> {
    if (!Number.isSafeInteger(m.amount) || m.amount === 0) throw new RangeError('a movement is a non-zero whole number of micro-USD');
    if (!m.idempotencyKey) throw new Error('a movement needs an idempotency key');
    const acct = this.state.accounts.get(m.accountId);
    if (!acct) throw new Error(`unknown account ${m.accountId}`);
    const previous = acct.credits.get(m.idempotencyKey);
    if (previous !== undefined) {
      if (previous !== m.amount) throw new CreditConflictError(m.idempotencyKey);
      return false;
    }
    if (Math.abs(acct.balance + m.amount) > Number.MAX_SAFE_INTEGER) throw new RangeError('the movement would take the balance past the largest exact amount');
    acct.credits.set(m.idempotencyKey, m.amount);
    acct.balance += m.amount;
    acct[m.counts] += m.amount;
    return true;
  }

  async refund(accountId: string, requestId: string): Promise<RefundOutcome> {
    const acct = this.state.accounts.get(accountId);
    const s = acct?.settled.get(requestId);
    if (!acct || !s) return { refunded: 0, unknown: true, duplicate: false };
    if (s.refunded) return { refunded: 0, unknown: false, duplicate: true };
    s.refunded = true;
    if (s.charged > 0) {
      acct.balance += s.charged;
      acct.refunded += s.charged;
      acct.usage.push({ kind: 'refund', requestId, amount: s.charged });
    }
    return { refunded: Math.max(0, s.charged), unknown: false, duplicate: false };
  }

  async balance(accountId: string): Promise<AccountBalance> {
    const acct = this.state.accounts.get(accountId);
    return { balance: acct?.balance ?? 0, held: acct?.held ?? 0 };
  }

  async keySpend(accountId: string, keyId: string, nowArg?: number): Promise<KeySpend> {
    const key = this.state.accounts.get(accountId)?.keys.get(keyId);
    const month = utcMonth(nowArg ?? this.opts.now());
    if (!key) return { lifetimeSpent: 0, lifetimeHeld: 0, monthSpent: 0, monthHeld: 0 };
    return {
      lifetimeSpent: key.lifetimeSpent,
      lifetimeHeld: key.lifetimeHeld,
      monthSpent: get(key.monthSpent, month),
      monthHeld: get(key.monthHeld, month),
    };
  }

  async listUsage(accountId: string, opts: { keyId?: string; limit?: number } = {}): Promise<UsageRecord[]> {
    const acct = this.state.accounts.get(accountId);
    if (!acct) return [];
    const limit = opts.limit ?? 100;
    const refunded = new Set<string>();
    const out: UsageRecord[] = [];
    for (let i = acct.usage.length - 1; i >= 0 && out.length < limit; i--) {
      const e = acct.usage[i];
      if (!e) continue;
      if (e.kind === 'refund') {
        refunded.add(e.requestId);
        continue;
      }
      if (opts.keyId !== undefined && e.record.keyId !== opts.keyId) continue;
      const rec: UsageRecord = { ...e.record, usage: { ...e.record.usage } };
      if (refunded.has(rec.requestId)) rec.refunded = true;
      out.push(rec);
    }
    return out;
  }

  async audit(accountId: string): Promise<AuditReport> {
    const acct = this.state.accounts.get(accountId);
    const credited = acct?.credited ?? 0;
    const refunded = acct?.refunded ?? 0;
    const balance = acct?.balance ?? 0;
    let usageTotal = acct?.usageArchived ?? 0;
    for (const e of acct?.usage ?? []) if (e.kind === 'usage') usageTotal += e.record.cost;
    const drawnDown = credited + refunded - balance;
    return {
      accountId,
      credited,
      refunded,
      balance,
      drawnDown,
      usageTotal,
      difference: drawnDown - usageTotal,
      holdsOutstanding: acct?.holds.size ?? 0,
    };
  }

  async close(): Promise<void> {}
}
