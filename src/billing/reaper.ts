// Returns expired holds (requests whose pod died before settling) on a timer, and samples the
// ledger's outstanding holds for the metrics. Runs never overlap.
import type { HoldsSummary, Ledger, Micros } from './ledger.js';

export interface ReaperOptions {
  intervalMs: number;
  /** Holds returned by a pass (only when some were) and the micro-USD they released. */
  onReaped?: (n: number, released: Micros) => void;
  /** When given, each pass ends with a ledger-wide sample of outstanding holds, reported here. */
  onHolds?: (summary: HoldsSummary) => void;
  /** A failed pass (Redis down) is reported here, once per pass, and retried at the next tick. */
  onError?: (err: unknown) => void;
}

export function startReaper(ledger: Ledger, opts: ReaperOptions): { stop(): void } {
  let running = false;
  let stopped = false;
  const tick = async (): Promise<void> => {
    if (running || stopped) return;
    running = true;
    // The first error of the pass; reported once, so a pass counts as one failure however many steps failed.
    let failure: { err: unknown } | undefined;
    try {
      try {
        const r = await ledger.reap();
        if (r.count > 0) opts.onReaped?.(r.count, r.released);
      } catch (err) {
        failure = { err };
      }
      // Sampled after the reap, so holds it just returned are no longer counted. A failed reap does not
      // skip the sample: the gauges would otherwise freeze at their last value.
      if (opts.onHolds && !stopped) {
        try {
          opts.onHolds(await ledger.holdsSummary());
        } catch (err) {
          failure ??= { err };
        }
      }
      if (failure) opts.onError?.(failure.err);
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
