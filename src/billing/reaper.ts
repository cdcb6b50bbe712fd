// Returns expired holds (requests whose pod died before settling) on a timer, and samples the
// ledger's outstanding holds for the metrics. Runs never overlap.
import type { HoldsSummary, Ledger } from './ledger.js';

export interface ReaperOptions {
  intervalMs: number;
  onReaped?: (n: number) => void;
  /** When given, each pass ends with a ledger-wide sample of outstanding holds, reported here. */
  onHolds?: (summary: HoldsSummary) => void;
  /** A failed pass (Redis down) is reported here and retried at the next tick. */
  onError?: (err: unknown) => void;
}

export function startReaper(ledger: Ledger, opts: ReaperOptions): { stop(): void } {
  let running = false;
  let stopped = false;
  const tick = async (): Promise<void> => {
    if (running || stopped) return;
    running = true;
    try {
      try {
        const n = await ledger.reapExpired();
        if (n > 0) opts.onReaped?.(n);
      } catch (err) {
        opts.onError?.(err);
      }
      // Sampled after the reap, so holds it just returned are no longer counted. A failed reap does not
      // skip the sample: the gauges would otherwise freeze at their last value.
      if (opts.onHolds && !stopped) {
        try {
          opts.onHolds(await ledger.holdsSummary());
        } catch (err) {
          opts.onError?.(err);
        }
      }
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void tick(), opts.intervalMs);
  // The reaper alone never keeps the process alive.
  timer.unref();
  return {
    stop() {
      stopped = true;
      clearInterval(timer);
    },
  };
}
