// The ledger with PostgreSQL as the record of money in: a credit commits its ledger entry there first
// (once per idempotency key), then the hot path applies it under the same key, so a credit Redis never
// saw is still on the record and a repeat never counts twice. Everything else is the hot path's.
import type {
  AccountBalance,
  AuditReport,
  HoldsSummary,
  KeySpend,
  Ledger,
  Micros,
  ReapResult,
  RefundOutcome,
  ReservationOutcome,
  ReservationRequest,
  SettlementOutcome,
  SettlementRequest,
  UsageRecord,
} from '../billing/ledger.js';
import type { Database } from './database.js';
import { recordMovement, type MovementKind } from './money-movement.js';

export class RecordedLedger implements Ledger {
  constructor(
    private readonly inner: Ledger,
    private readonly db: Database,
    private readonly kind: MovementKind = 'admin_credit',
  ) {}

  async credit(accountId: string, amount: Micros, idempotencyKey: string): Promise<boolean> {
    if (!Number.isSafeInteger(amount) || amount <= 0) return this.inner.credit(accountId, amount, idempotencyKey);
    await this.db.transaction((tx) => recordMovement(tx, { accountId, kind: this.kind, amount, idempotencyKey }));
    // Committed: the hot path's own idempotency key makes a repeat (or a retry after a crash here) a no-op.
    return this.inner.credit(accountId, amount, idempotencyKey);
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
  refund(accountId: string, requestId: string): Promise<RefundOutcome> {
    return this.inner.refund(accountId, requestId);
  }
  balance(accountId: string): Promise<AccountBalance> {
    return this.inner.balance(accountId);
  }
  keySpend(accountId: string, keyId: string, now?: number): Promise<KeySpend> {
    return this.inner.keySpend(accountId, keyId, now);
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
