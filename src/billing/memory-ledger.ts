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
  MoneyStanding,
  JournalSink,
  Ledger,
  ReapResult,
  RefundOutcome,
  ReservationOutcome,
  ReservationRequest,
  SettlementOutcome,
  SettlementRequest,
  UsageRecord,
} from './ledger.js';
import { checkPositiveAmount, CreditConflictError, checkReservation, checkSettlement, trimThreshold } from './ledger-common.js';
import type { MemoryAccount, MemoryHold, MemoryKey, MemoryState } from './memory-state.js';
import type { BudgetScope, KeyCaps, ScopeBudgets } from '../accounts/account-store.js';
import type { RateLimits } from '../accounts/rate-limits.js';
import { admit, type BucketReading, type Needs } from '../limits/admission.js';
import { bucketsOf, fieldFor, KEY_SPEND_FIELDS, requestPath, SCOPED, type Bucket, type BucketPath, type LimitSource } from './buckets.js';
import { DEFAULT_RATE_LIMIT_WINDOW_MS, rateLimitedTokens, rateLimitStateOf } from './rate-limit-state.js';
import { utcMonth } from './month.js';

const get = (m: Map<string, number> | undefined, k: string): number => m?.get(k) ?? 0;
const nonNeg = (v: number): number => (v < 0 ? 0 : v);

/** What a limit's value is read from: a key (caps, rate limits), an account (default rate limits), a team or member (budgets). */
type SettingsRecord = KeyCaps & ScopeBudgets & { rateLimits?: RateLimits; name?: string };

/** A setting of the record a limit's value is read from. */
function settingOf(record: SettingsRecord | undefined, source: LimitSource): number | undefined {
  if (record === undefined) return undefined;
  switch (source.setting) {
    case 'lifetimeCap':
    case 'monthlyCap':
    case 'lifetimeBudget':
    case 'monthlyBudget':
      return record[source.setting];
    default:
      return record.rateLimits?.[source.setting];
  }
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

  /** A bucket's counters (spend, holds, window counts), by the hash name the Redis ledger keeps them under. */
  private counters(acct: MemoryAccount, at: string): Map<string, number> {
    let c = acct.counters.get(at);
    if (c === undefined) {
      c = new Map();
      acct.counters.set(at, c);
    }
    return c;
  }

  private inFlight(acct: MemoryAccount, at: string): Map<string, number> {
    let f = acct.inFlight.get(at);
    if (f === undefined) {
      f = new Map();
      acct.inFlight.set(at, f);
    }
    return f;
  }

  /** The limit in force: the first of the bucket's sources that is set (the key's own, then the account's default). */
  private limitOf(acct: MemoryAccount, key: MemoryKey | undefined, b: Bucket): number | undefined {
    for (const source of b.limit) {
      const v = settingOf(this.recordOf(acct, key, source), source);
      if (v !== undefined) return v;
    }
    return undefined;
  }

  /** The record a source's settings are kept on (a team or member it holds nothing of has none). */
  private recordOf(acct: MemoryAccount, key: MemoryKey | undefined, source: Pick<LimitSource, 'scope' | 'at'>): SettingsRecord | undefined {
    switch (source.scope) {
      case 'account':
        return acct.account;
      case 'team':
      case 'member':
        return acct.scopes.get(source.at)?.record;
      case 'key':
        return key?.record;
      default: {
        const never: never = source.scope;
        throw new Error(`unknown scope ${String(never)}`);
      }
    }
  }

  /** The name a refusal by this bucket's limit gives its scope (what Redis keeps as the hash's `name`). */
  private nameOf(acct: MemoryAccount, key: MemoryKey, b: Bucket): string {
    const own = b.limit[0];
    if (own === undefined) return b.kind === 'balance' ? acct.account.name : '';
    return this.recordOf(acct, key, own)?.name ?? '';
  }

  /** One bucket as it stands (reserve.lua's reading step). */
  private read(acct: MemoryAccount, key: MemoryKey | undefined, b: Bucket, now: number, month: string, win: number): BucketReading {
    const at = { reason: b.reason, unit: b.unit };
    switch (b.kind) {
      case 'balance':
        return { ...at, limit: acct.balance, used: acct.held };
      case 'cap': {
        const c = acct.counters.get(b.at);
        return { ...at, limit: this.limitOf(acct, key, b), used: get(c, fieldFor(b, 'spent', month)) + get(c, fieldFor(b, 'held', month)) };
      }
      case 'window': {
        const c = acct.counters.get(b.at);
        return { ...at, limit: this.limitOf(acct, key, b), used: c?.get(b.window) === win ? get(c, b.count) : 0 };
      }
      case 'in_flight': {
        const limit = this.limitOf(acct, key, b);
        if (limit === undefined) return { ...at, limit, used: 0 };
        const flight = this.inFlight(acct, b.at);
        for (const [rid, due] of flight) if (due <= now) flight.delete(rid);
        return { ...at, limit, used: flight.size };
      }
      default: {
        const never: never = b;
        throw new Error(`unknown bucket ${JSON.stringify(never)}`);
      }
    }
  }

  /** Admits (and holds) or refuses, synchronously: nothing can interleave. The steps and the rule are reserve.lua's. */
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
    const buckets = bucketsOf(requestPath(req));
    const windowMs = req.rateLimitWindowMs ?? DEFAULT_RATE_LIMIT_WINDOW_MS;
    const win = Math.floor(now / windowMs);
    const deadline = now + req.holdTtlMs;
    const readings = buckets.map((b) => this.read(acct, key, b, now, month, win));
    // Counts that share a window field are kept together: all are counted whenever any of them is limited.
    const counted = new Set<string>();
    buckets.forEach((b, i) => {
      if (b.kind === 'window' && readings[i]?.limit !== undefined) counted.add(`${b.at}\0${b.window}`);
    });
    const needs: Needs = { money: amount, requests: 1, tokens: req.rateLimitTokens ?? 0, concurrent_requests: 1 };
    const verdict = admit(readings, needs);
    const resetMs = (win + 1) * windowMs - now;
    if (!verdict.admitted) {
      const rateLimit = rateLimitStateOf(readings, resetMs);
      const { reason, needed, available, availableOverall } = verdict;
      const at = buckets.findIndex((b) => b.reason === reason);
      const binding = buckets[at] as Bucket;
      return {
        admitted: false,
        reason,
        needed,
        available,
        availableOverall,
        // The value of a limit that is set on its scope (a cap, a budget, a rate limit); the balance has none.
        ...(binding.limit.length === 0 || readings[at]?.limit === undefined ? {} : { limit: readings[at].limit }),
        scopeName: this.nameOf(acct, key, binding),
        accountName: acct.account.name,
        ...(rateLimit === undefined ? {} : { rateLimit }),
      };
    }
    const hold: MemoryHold = { amount, keyId: req.keyId, month, deadline, buckets, windows: new Map() };
    buckets.forEach((b, i) => {
      const r = readings[i] as BucketReading;
      switch (b.kind) {
        case 'balance':
          acct.held += amount;
          r.used += amount;
          return;
        case 'cap':
          this.add(acct, b.at, fieldFor(b, 'held', month), amount);
          r.used += amount;
          return;
        case 'window': {
          if (!counted.has(`${b.at}\0${b.window}`)) return;
          const c = this.counters(acct, b.at);
          r.used += needs[b.unit];
          c.set(b.window, win);
          c.set(b.count, r.used);
          if (b.giveBack === true && r.limit !== undefined) hold.windows.set(i, { window: win, counted: needs[b.unit] });
          return;
        }
        case 'in_flight':
          if (r.limit === undefined) return;
          this.inFlight(acct, b.at).set(req.requestId, deadline);
          r.used += 1;
          return;
        default: {
          const never: never = b;
          throw new Error(`unknown bucket ${JSON.stringify(never)}`);
        }
      }
    });
    acct.holds.set(req.requestId, hold);
    const rateLimit = rateLimitStateOf(readings, resetMs);
    return { admitted: true, ...(rateLimit === undefined ? {} : { rateLimit }) };
  }

  private add(acct: MemoryAccount, at: string, field: string, d: number): void {
    const c = this.counters(acct, at);
    c.set(field, get(c, field) + d);
  }

  /** What a money bucket has room for now, or undefined when it has no limit (settle.lua's late charge). */
  private roomOf(acct: MemoryAccount, key: MemoryKey | undefined, b: Bucket, month: string): number | undefined {
    if (b.kind === 'balance') return acct.balance - acct.held;
    if (b.kind !== 'cap') return undefined;
    const limit = this.limitOf(acct, key, b);
    if (limit === undefined) return undefined;
    const c = acct.counters.get(b.at);
    return limit - get(c, fieldFor(b, 'spent', month)) - get(c, fieldFor(b, 'held', month));
  }

  /** A charge into every money bucket: the balance is drawn down, caps count it as spend. */
  private charge(acct: MemoryAccount, buckets: readonly Bucket[], month: string, amount: number): void {
    for (const b of buckets) {
      if (b.kind === 'balance') acct.balance -= amount;
      else if (b.kind === 'cap') this.add(acct, b.at, fieldFor(b, 'spent', month), amount);
    }
  }

  /** Gives a hold's money back to every money bucket it drew from. */
  private release(acct: MemoryAccount, hold: { amount: number; month: string; buckets: readonly Bucket[] }): void {
    for (const b of hold.buckets) {
      if (b.kind === 'balance') acct.held -= hold.amount;
      else if (b.kind === 'cap') this.add(acct, b.at, fieldFor(b, 'held', hold.month), -hold.amount);
    }
  }

  async settle(req: SettlementRequest): Promise<SettlementOutcome> {
    checkSettlement(req);
    const duplicate: SettlementOutcome = { charged: 0, released: 0, duplicate: true, late: false };
    const acct = this.state.accounts.get(req.accountId);
    if (!acct || acct.settled.has(req.requestId)) return duplicate;
    // The request is no longer in flight, whatever became of its hold.
    for (const b of bucketsOf(requestPath(req))) if (b.kind === 'in_flight') acct.inFlight.get(b.at)?.delete(req.requestId);
    const hold = acct.holds.get(req.requestId);
    let charge: number;
    let released = 0;
    let late = false;
    let month: string;
    let reserved: number;
    if (hold) {
      if (hold.keyId !== req.keyId) throw new Error('hold belongs to another key');
      month = hold.month;
      reserved = hold.amount;
      charge = Math.min(req.cost, hold.amount);
      released = hold.amount - charge;
      this.release(acct, hold);
      this.charge(acct, hold.buckets, month, charge);
      hold.buckets.forEach((b, i) => {
        if (b.kind === 'in_flight') acct.inFlight.get(b.at)?.delete(req.requestId);
        // The token window counted the worst case: the unused part goes back while the window lasts.
        const counted = hold.windows.get(i);
        if (b.kind !== 'window' || counted === undefined) return;
        const c = acct.counters.get(b.at);
        const unused = counted.counted - rateLimitedTokens(req.usage);
        if (unused > 0 && c?.get(b.window) === counted.window) c.set(b.count, nonNeg(get(c, b.count) - unused));
      });
      acct.holds.delete(req.requestId);
    } else {
      const reaped = acct.reaped.get(req.requestId);
      if (!reaped) return duplicate;
      if (reaped.keyId !== req.keyId) throw new Error('reaped hold belongs to another key');
      month = reaped.month;
      reserved = reaped.amount;
      late = true;
      // The hold is gone, so other requests may have used its room: take only what every money bucket still has.
      charge = Math.min(req.cost, reaped.amount);
      const key = acct.keys.get(reaped.keyId);
      for (const b of reaped.buckets) {
        const room = this.roomOf(acct, key, b, month);
        if (room !== undefined && room < charge) charge = room;
      }
      charge = nonNeg(charge);
      this.charge(acct, reaped.buckets, month, charge);
      acct.reaped.delete(req.requestId);
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
        this.release(acct, hold);
        acct.reaped.set(rid, { amount: hold.amount, keyId: hold.keyId, month: hold.month, buckets: hold.buckets });
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

  keySpend(accountId: string, keyId: string, nowArg?: number): Promise<KeySpend> {
    return this.spendAt(accountId, SCOPED.key(keyId), nowArg);
  }

  scopeSpend(accountId: string, scope: BudgetScope, id: string, nowArg?: number): Promise<KeySpend> {
    return this.spendAt(accountId, SCOPED[scope](id), nowArg);
  }

  async moneyStanding(accountId: string, path: BucketPath, nowArg?: number): Promise<MoneyStanding[]> {
    const now = nowArg ?? this.opts.now();
    const acct = this.state.accounts.get(accountId);
    if (acct === undefined) return [];
    const key = acct.keys.get(path.keyId);
    return bucketsOf(path)
      .filter((b) => b.unit === 'money')
      .map((b) => {
        const r = this.read(acct, key, b, now, utcMonth(now), 0);
        return { reason: b.reason, limit: r.limit, used: r.used };
      });
  }

  private async spendAt(accountId: string, at: string, nowArg?: number): Promise<KeySpend> {
    const month = utcMonth(nowArg ?? this.opts.now());
    const c = this.state.accounts.get(accountId)?.counters.get(at);
    return {
      lifetimeSpent: get(c, KEY_SPEND_FIELDS.lifetimeSpent),
      lifetimeHeld: get(c, KEY_SPEND_FIELDS.lifetimeHeld),
      monthSpent: get(c, KEY_SPEND_FIELDS.monthSpent(month)),
      monthHeld: get(c, KEY_SPEND_FIELDS.monthHeld(month)),
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
