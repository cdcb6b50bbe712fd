// A token bucket for the record look-ups of key hashes the hot path does not know. Such a hash is almost
// always a wrong or made-up key, and a stream of them must not become a stream of queries on the record
// the journal and the dashboard depend on; the rare live key whose push to Redis is late (the writer
// retries within a second, every gateway's sweeper within 500 ms) is still found through the budget.
export class LookupBudget {
  private tokens: number;
  private refilledAt: number;

  constructor(
    /** Look-ups per second, and the burst: 0 turns look-ups of unknown hashes off. */
    private readonly perSecond: number,
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = perSecond;
    this.refilledAt = now();
  }

  /** Takes one look-up if the budget has one. */
  take(): boolean {
    const now = this.now();
    this.tokens = Math.min(this.perSecond, this.tokens + ((now - this.refilledAt) * this.perSecond) / 1000);
    this.refilledAt = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
