// The ledger as the gateway uses it once PostgreSQL is the record: every settlement the hot path applies
// is handed to the journal writer (no extra Redis round trip: the settle script already appended the
// Redis copy; no extra promise either: the hot path hands it over as it reads its reply), and while the
// writer is further behind than its bound new reservations are refused, so the gateway never serves
// money it cannot record.
import { DelegatingLedger } from '../billing/delegating-ledger.js';
import type { Ledger, ReservationOutcome, RefusalReason, ReservationRequest, SettlementOutcome, SettlementRequest } from '../billing/ledger.js';
import { utcMonth } from '../billing/month.js';
import { isLimitReason } from '../limits/limits.js';
import type { NotALedgerFault } from '../billing/ledger-health.js';
import { journalEntryOf } from './journal.js';
import type { JournalWriter } from './journal-writer.js';


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

/** A key refused again within this long is not recorded again (its refusals are counted in the metrics). */
export const REFUSAL_RECORD_WINDOW_MS = 60_000;
/** Keys remembered at most: past it, expired slots are dropped, and refusals beyond it go unrecorded. */
const MAX_REFUSAL_SLOTS = 100_000;

export class JournaledLedger extends DelegatingLedger {
  private readonly refusalsRecorded = new Map<string, number>();

  constructor(
    inner: Ledger,
    readonly writer: JournalWriter,
  ) {
    super(inner);
    // The hot path appends each settlement's copy (the Redis journal stream) only once a writer takes
    // them, and hands this writer each settlement and refusal as it reads its reply.
    this.journalSettlements({
      settled: (req, outcome) => this.recordSettlement(req, outcome),
      refused: (req, reason) => this.recordRefusal(req, reason),
    });
  }

  override reserve(req: ReservationRequest): Promise<ReservationOutcome> {
    if (this.writer.behind()) return Promise.reject(new JournalBehindError(this.writer.lag().oldestMs, this.writer.maxLagMs));
    return this.inner.reserve(req);
  }

  private recordSettlement(req: SettlementRequest, outcome: SettlementOutcome): void {
    const entry = journalEntryOf(req, outcome);
    if (entry !== undefined) this.writer.add(entry);
  }

  /**
   * A 402 is recorded from this process's memory only: it moves no money, so it needs no Redis copy and
   * costs the request path nothing (a gateway that dies loses its uncommitted refusals, no money).
   */
  private recordRefusal(req: ReservationRequest, reason: RefusalReason): void {
    // Refusals by a limit (402 for money, 429 for a rate limit), which the dashboard lists; unknown and
    // revoked keys are 401s.
    if (!isLimitReason(reason)) return;
    const time = req.now ?? Date.now();
    // One row per key and reason a window: a key refused in a loop (no balance left, a script retrying)
    // shows its holder why, without a row per attempt; every refusal is still counted in the metrics
    // (tollgate_reservations_total{outcome="refused"}).
    const slot = `${req.keyId}\0${reason}`;
    const last = this.refusalsRecorded.get(slot);
    if (last !== undefined && time - last < REFUSAL_RECORD_WINDOW_MS) return;
    if (this.refusalsRecorded.size >= MAX_REFUSAL_SLOTS) {
      for (const [k, at] of this.refusalsRecorded) if (time - at >= REFUSAL_RECORD_WINDOW_MS) this.refusalsRecorded.delete(k);
      if (this.refusalsRecorded.size >= MAX_REFUSAL_SLOTS) return;
    }
    this.refusalsRecorded.set(slot, time);
    this.writer.add({
      requestId: req.requestId,
      accountId: req.accountId,
      keyId: req.keyId,
      teamId: req.teamId,
      memberId: req.memberId,
      model: req.model ?? '',
      usage: { input: 0, output: 0, cachedInput: 0, reasoning: 0 },
      cost: 0,
      reserved: 0,
      status: 'refused',
      latencyMs: 0,
      month: utcMonth(time),
      time,
      refusal: reason,
    });
  }

  override async close(): Promise<void> {
    await this.writer.close();
    await this.inner.close();
  }
}
