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
  RefusalReason,
  ReservationRequest,
  SettlementOutcome,
  SettlementRequest,
  UsageRecord,
} from '../billing/ledger.js';
import { utcMonth } from '../billing/month.js';
import type { NotALedgerFault } from '../billing/ledger-health.js';
import { journalEntryOf } from './journal.js';
import type { JournalWriter } from './journal-writer.js';

/** Refusals that answer 402 (a limit), which the dashboard lists; unknown and revoked keys are 401s. */
const LIMIT_REFUSALS: ReadonlySet<RefusalReason> = new Set(['insufficient_balance', 'key_lifetime_cap_reached', 'key_monthly_cap_reached']);

/** The journal is further behind than TOLLGATE_JOURNAL_MAX_LAG_MS: the request is refused, not served. */
export class JournalBehindError extends Error implements NotALedgerFault {
  readonly notALedgerFault = true as const;
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
    const outcome = await this.inner.reserve(req);
    // A 402 is recorded from this process's memory only: it moves no money, so it needs no Redis copy
    // and costs the request path nothing (a gateway that dies loses its uncommitted refusals, no money).
    if (!outcome.admitted && LIMIT_REFUSALS.has(outcome.reason)) {
      const time = req.now ?? Date.now();
      this.writer.add({
        requestId: req.requestId,
        accountId: req.accountId,
        keyId: req.keyId,
        model: req.model ?? '',
        usage: { input: 0, output: 0, cachedInput: 0, reasoning: 0 },
        cost: 0,
        reserved: 0,
        status: 'refused',
        latencyMs: 0,
        month: utcMonth(time),
        time,
        refusal: outcome.reason,
      });
    }
    return outcome;
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
