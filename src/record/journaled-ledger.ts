// The ledger as the gateway uses it once PostgreSQL is the record: every settlement the hot path applies
// is handed to the journal writer (no extra Redis round trip: the settle script already appended the
// Redis copy), and while the writer is further behind than its bound new reservations are refused, so
// the gateway never serves money it cannot record.
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
import { journalEntryOf } from './journal.js';
import type { JournalWriter } from './journal-writer.js';

/** The journal is further behind than TOLLGATE_JOURNAL_MAX_LAG_MS: the request is refused, not served. */
export class JournalBehindError extends Error {
  constructor(
    readonly lagMs: number,
    readonly maxLagMs: number,
  ) {
    super(`usage records are ${lagMs} ms behind (bound ${maxLagMs} ms)`);
    this.name = 'JournalBehindError';
  }
}

export class JournaledLedger implements Ledger {
  constructor(
    private readonly inner: Ledger,
    readonly writer: JournalWriter,
  ) {}

  async reserve(req: ReservationRequest): Promise<ReservationOutcome> {
    if (this.writer.behind()) throw new JournalBehindError(this.writer.lag().oldestMs, this.writer.maxLagMs);
    return this.inner.reserve(req);
  }

  async settle(req: SettlementRequest): Promise<SettlementOutcome> {
    const outcome = await this.inner.settle(req);
    const entry = journalEntryOf(req, outcome);
    if (entry !== undefined) this.writer.add(entry);
    return outcome;
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
  listUsage(accountId: string, opts?: { keyId?: string; limit?: number }): Promise<UsageRecord[]> {
    return this.inner.listUsage(accountId, opts);
  }
  audit(accountId: string): Promise<AuditReport> {
    return this.inner.audit(accountId);
  }
  async close(): Promise<void> {
    await this.writer.close();
    await this.inner.close();
  }
}
