// Settlements that are never lost. The first attempt runs at once; one that fails (the ledger is
// unreachable for a moment) is kept in this process and retried with backoff, off the response path,
// until it succeeds: past its hold's deadline too, since a late settlement still charges exactly once
// (the reaped marker). Dropping it instead let the reaper return the whole hold: the request was free.
// On shutdown `flush` retries what is left until its deadline; what still fails then is abandoned:
// counted, alerted on, and logged with the whole settlement so an operator can apply it by hand.
import type { Ledger, SettlementOutcome, SettlementRequest } from '../billing/ledger.js';

export interface SettlementQueueOptions {
  ledger: Pick<Ledger, 'settle'>;
  /** First retry after this many ms; each further one waits twice as long, up to `maxBackoffMs`. */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** Retries in flight at once, so a recovered ledger is not hit by the whole backlog in one tick. */
  concurrency?: number;
  /** The number of settlements waiting changed. */
  onPending?: (pending: number) => void;
  /** A settlement was given up at shutdown. */
  onAbandoned?: (req: SettlementRequest, error: string) => void;
  log?: (event: string, fields: Record<string, unknown>) => void;
}

interface Waiting {
  req: SettlementRequest;
  attempts: number;
  dueAt: number;
  lastError: string;
  onSettled: ((outcome: SettlementOutcome) => void) | undefined;
}

function errorText(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 300);
}

export class SettlementQueue {
  private readonly waiting = new Map<string, Waiting>();
  private readonly running = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private readonly initialBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly concurrency: number;

  constructor(private readonly opts: SettlementQueueOptions) {
    this.initialBackoffMs = opts.initialBackoffMs ?? 100;
    this.maxBackoffMs = opts.maxBackoffMs ?? 30_000;
    this.concurrency = opts.concurrency ?? 16;
  }

  /** Settlements waiting for a retry (or being retried). */
  get pending(): number {
    return this.waiting.size;
  }

  /**
   * Settles now, or keeps the settlement for retries when the ledger fails. Resolves with the outcome
   * of a first attempt that succeeded, else undefined; `onSettled` runs once whenever it succeeds.
   */
  async settle(req: SettlementRequest, onSettled?: (outcome: SettlementOutcome) => void): Promise<SettlementOutcome | undefined> {
    try {
      const outcome = await this.opts.ledger.settle(req);
      onSettled?.(outcome);
      return outcome;
    } catch (err) {
      this.keep(req, errorText(err), onSettled);
      return undefined;
    }
  }

  /**
   * Retries everything waiting until it has all settled or `deadlineMs` has passed; what is left then
   * is abandoned. Later settle() calls still work (a drain settles its last streams after this).
   */
  async flush(deadlineMs: number): Promise<{ settled: number; abandoned: number }> {
    const until = Date.now() + deadlineMs;
    let settled = 0;
    while (this.waiting.size > 0 && Date.now() < until) {
      for (const w of [...this.waiting.values()]) {
        if (this.running.has(w.req.requestId)) continue;
        if (await this.attempt(w)) settled += 1;
      }
      if (this.waiting.size > 0) await new Promise((r) => setTimeout(r, Math.min(200, Math.max(0, until - Date.now()))));
    }
    const abandoned = this.waiting.size;
    for (const w of [...this.waiting.values()]) this.abandon(w);
    return { settled, abandoned };
  }

  /** Makes everything waiting due now (the ledger is back: no need to sit out the backoff). */
  retryNow(): void {
    const now = Date.now();
    for (const w of this.waiting.values()) w.dueAt = Math.min(w.dueAt, now);
    this.schedule();
  }

  /** Stops the retry timer; call after flush(). */
  close(): void {
    this.closed = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private keep(req: SettlementRequest, error: string, onSettled: ((o: SettlementOutcome) => void) | undefined): void {
    if (this.waiting.has(req.requestId)) return;
    this.waiting.set(req.requestId, { req, attempts: 1, dueAt: Date.now() + this.initialBackoffMs, lastError: error, onSettled });
    this.opts.log?.('settlement_deferred', { requestId: req.requestId, error });
    this.opts.onPending?.(this.waiting.size);
    this.schedule();
  }

  private schedule(): void {
    if (this.closed || this.waiting.size === 0) return;
    let next = Number.POSITIVE_INFINITY;
    for (const w of this.waiting.values()) if (!this.running.has(w.req.requestId)) next = Math.min(next, w.dueAt);
    if (!Number.isFinite(next)) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.retryDue(), Math.max(0, next - Date.now()));
    // Retries must not keep a stopping process alive: flush() is the shutdown path.
    this.timer.unref();
  }

  private async retryDue(): Promise<void> {
    this.timer = undefined;
    const now = Date.now();
    const due = [...this.waiting.values()].filter((w) => w.dueAt <= now && !this.running.has(w.req.requestId)).slice(0, this.concurrency);
    await Promise.all(due.map((w) => this.attempt(w)));
    this.schedule();
  }

  /** One retry; true when it settled. */
  private async attempt(w: Waiting): Promise<boolean> {
    this.running.add(w.req.requestId);
    try {
      const outcome = await this.opts.ledger.settle(w.req);
      this.waiting.delete(w.req.requestId);
      this.opts.onPending?.(this.waiting.size);
      this.opts.log?.('settlement_recovered', { requestId: w.req.requestId, attempts: w.attempts + 1, late: outcome.late, charged: outcome.charged });
      w.onSettled?.(outcome);
      return true;
    } catch (err) {
      w.attempts += 1;
      w.lastError = errorText(err);
      w.dueAt = Date.now() + Math.min(this.maxBackoffMs, this.initialBackoffMs * 2 ** Math.min(20, w.attempts - 1));
      return false;
    } finally {
      this.running.delete(w.req.requestId);
    }
  }

  private abandon(w: Waiting): void {
    this.waiting.delete(w.req.requestId);
    this.opts.onPending?.(this.waiting.size);
    // The whole settlement, so it can be applied by hand: ids, model, token counts and cost, no secret.
    this.opts.log?.('settlement_abandoned', { settlement: w.req, attempts: w.attempts, error: w.lastError });
    this.opts.onAbandoned?.(w.req, w.lastError);
  }
}
