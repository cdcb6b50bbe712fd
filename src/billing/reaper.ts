// Returns expired holds (requests whose pod died before settling) on a timer. Runs never overlap.
import type { Ledger } from './ledger.js';

export interface ReaperOptions {
  intervalMs: number;
  onReaped?: (n: number) => void;
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
      const n = await ledger.reapExpired();
      if (n > 0) opts.onReaped?.(n);
    } catch (err) {
      opts.onError?.(err);
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
