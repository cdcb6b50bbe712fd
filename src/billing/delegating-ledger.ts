// A ledger that hands every call to another: the base of the wrappers that add one concern to some
// calls (the journal to settle and reserve, the record to credit) and pass the rest through unchanged.
import type {
  AccountBalance,
  BudgetScope,
  AuditReport,
  HoldsSummary,
  JournalingLedger,
  JournalSink,
  KeySpend,
  Ledger,
  Micros,
  MoneyStanding,
  ReapResult,
  RefundOutcome,
  ReservationOutcome,
  ReservationRequest,
  SettlementOutcome,
  SettlementRequest,
  UsageRecord,
} from './ledger.js';
import { isJournalingLedger } from './ledger.js';
import type { BucketPath } from './buckets.js';

export class DelegatingLedger implements Ledger, JournalingLedger {
  constructor(protected readonly inner: Ledger) {}

  /** Passed on to the hot path below, when it keeps journal copies (see JournalingLedger). */
  journalSettlements(sink?: JournalSink): void {
    if (isJournalingLedger(this.inner)) this.inner.journalSettlements(sink);
  }

  reserve(req: ReservationRequest): Promise<ReservationOutcome> {
    return this.inner.reserve(req);
  }
  settle(req: SettlementRequest): Promise<SettlementOutcome> {
    return this.inner.settle(req);
  }
  reap(now?: number): Promise<ReapResult> {
    return this.inner.reap(now);
  }
  reapExpired(now?: number): Promise<number> {
    return this.inner.reapExpired(now);
  }
  holdsSummary(): Promise<HoldsSummary> {
    return this.inner.holdsSummary();
  }
  credit(accountId: string, amount: Micros, idempotencyKey: string): Promise<boolean> {
    return this.inner.credit(accountId, amount, idempotencyKey);
  }
  refund(accountId: string, requestId: string): Promise<RefundOutcome> {
    return this.inner.refund(accountId, requestId);
  }
  balance(accountId: string): Promise<AccountBalance> {
    return this.inner.balance(accountId);
  }
  keySpend(accountId: string, keyId: string, now?: number): Promise<KeySpend> {
    return this.inner.keySpend(accountId, keyId, now);
  }
  scopeSpend(accountId: string, scope: BudgetScope, id: string, now?: number): Promise<KeySpend> {
    return this.inner.scopeSpend(accountId, scope, id, now);
  }
  moneyStanding(accountId: string, path: BucketPath, now?: number): Promise<MoneyStanding[]> {
    return this.inner.moneyStanding(accountId, path, now);
  }
  listUsage(accountId: string, opts?: { keyId?: string; limit?: number }): Promise<UsageRecord[]> {
    return this.inner.listUsage(accountId, opts);
  }
  audit(accountId: string): Promise<AuditReport> {
    return this.inner.audit(accountId);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
