// Refusals of unrecognised keys, counted per client address in fixed windows: past the limit, further
// requests from that address with a key this gateway does not already know get a 429 with Retry-After
// before any lookup, like every other throttle. Guessing keys then costs the guesser time and the
// gateway nothing; a known key (in the authenticator's cache) from the same address still works.
const MAX_ADDRESSES = 100_000;

interface Window {
  startedAt: number;
  refusals: number;
}

export class RefusalThrottle {
  private readonly windows = new Map<string, Window>();

  constructor(
    /** Refusals per address per window; 0 turns the throttle off. */
    private readonly limit: number,
    private readonly windowMs: number = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** Seconds until the address may try again, or undefined while it is within its limit. */
  retryAfterSeconds(address: string): number | undefined {
    if (this.limit <= 0) return undefined;
    const w = this.current(address);
    if (w === undefined || w.refusals < this.limit) return undefined;
    return Math.max(1, Math.ceil((w.startedAt + this.windowMs - this.now()) / 1000));
  }

  /** Counts one refusal of an unrecognised key from the address. */
  refused(address: string): void {
    if (this.limit <= 0) return;
    const w = this.current(address);
    if (w !== undefined) {
      w.refusals++;
      return;
    }
    // Bounded memory: a flood from more addresses than this starts the count afresh.
    if (this.windows.size >= MAX_ADDRESSES) this.windows.clear();
    this.windows.set(address, { startedAt: this.now(), refusals: 1 });
  }

  private current(address: string): Window | undefined {
    const w = this.windows.get(address);
    if (w === undefined) return undefined;
    if (this.now() - w.startedAt >= this.windowMs) {
      this.windows.delete(address);
      return undefined;
    }
    return w;
  }
}
