// A controller work queue in the style of client-go's: keys are deduplicated while waiting, a key is
// never processed by two workers at once (an add during processing is replayed afterwards), failures
// are retried with per-key exponential backoff, and a handler can ask to be called again later.

export interface ReconcileResult {
  /** Call again after this many ms (periodic work such as probes). */
  requeueAfterMs?: number;
}

export interface WorkQueueOptions {
  baseDelayMs?: number;
  maxDelayMs?: number;
}

export class WorkQueue {
  private readonly pending: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly waiters: (() => void)[] = [];
  private shuttingDown = false;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(opts: WorkQueueOptions = {}) {
    this.baseDelayMs = opts.baseDelayMs ?? 50;
    this.maxDelayMs = opts.maxDelayMs ?? 30_000;
  }

  add(key: string): void {
    if (this.shuttingDown || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return; // re-queued when the current run finishes
    this.pending.push(key);
    this.waiters.shift()?.();
  }

  /** Adds the key after `ms`; an earlier pending delayed add for the key wins. */
  addAfter(key: string, ms: number): void {
    if (this.shuttingDown) return;
    if (ms <= 0) return this.add(key);
    if (this.timers.has(key)) return;
    this.timers.set(
      key,
      setTimeout(() => {
        this.timers.delete(key);
        this.add(key);
      }, ms),
    );
  }

  addRateLimited(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const delay = Math.min(this.baseDelayMs * 2 ** n, this.maxDelayMs);
    const existing = this.timers.get(key);
    if (existing) {
      clearTimeout(existing);
      this.timers.delete(key);
    }
    this.addAfter(key, delay);
    return delay;
  }

  /** Resets the key's backoff after a success. */
  forget(key: string): void {
    this.failures.delete(key);
  }

  get length(): number {
    return this.pending.length;
  }

  private async get(): Promise<string | undefined> {
    while (this.pending.length === 0) {
      if (this.shuttingDown) return undefined;
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
      });
    }
    const key = this.pending.shift();
    if (key === undefined) return undefined;
    this.dirty.delete(key);
    this.processing.add(key);
    return key;
  }

  private done(key: string): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) {
      this.pending.push(key);
      this.waiters.shift()?.();
    }
  }

  /**
   * Runs `workers` loops calling handle(key) until shutdown. A throw means retry with backoff;
   * a result with requeueAfterMs schedules the next call.
   */
  run(workers: number, handle: (key: string) => Promise<ReconcileResult | void>, onError?: (key: string, err: unknown) => void): Promise<void> {
    const loop = async (): Promise<void> => {
      for (;;) {
        const key = await this.get();
        if (key === undefined) return;
        try {
          const result = await handle(key);
          this.forget(key);
          if (result?.requeueAfterMs !== undefined) this.addAfter(key, result.requeueAfterMs);
        } catch (err) {
          onError?.(key, err);
          this.addRateLimited(key);
        } finally {
          this.done(key);
        }
      }
    };
    return Promise.all(Array.from({ length: workers }, loop)).then(() => undefined);
  }

  shutdown(): void {
    this.shuttingDown = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.pending.length = 0;
    this.dirty.clear();
    for (const wake of this.waiters.splice(0)) wake();
  }
}
