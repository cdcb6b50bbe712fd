// Where reconciliation gets its figures in a running process, and the periodic job that runs it.
import type { Backend } from '../billing/backends.js';
import type { RedisJournalStream } from './redis-journal-stream.js';
import type { Database } from './database.js';
import type { JournalEntry } from './journal.js';
import type { JournalWriter } from './journal-writer.js';
import { reconcileSettled, type ReconcileSources, type ReconciliationReport } from './reconcile.js';

/**
 * Uncommitted settlements are read from the Redis journal streams and from this process's writer (after
 * a Redis wipe the writer's memory is the only copy).
 */
export function reconcileSources(db: Database, backend: Backend, stream: Pick<RedisJournalStream, 'pending'> | undefined, writer: JournalWriter | undefined): ReconcileSources {
  return {
    db,
    accounts: backend.accounts,
    ledger: backend.ledger,
    async uncommitted(accountId: string): Promise<JournalEntry[]> {
      const byId = new Map<string, JournalEntry>();
      for (const e of (await stream?.pending(accountId)) ?? []) byId.set(e.requestId, e);
      for (const e of writer?.pendingFor(accountId) ?? []) byId.set(e.requestId, e);
      return [...byId.values()];
    },
  };
}

export interface Reconciler {
  /** The last pass's report (undefined before the first). */
  last(): ReconciliationReport | undefined;
  stop(): void;
}

export function startReconciler(
  src: ReconcileSources,
  opts: { intervalMs: number; onReport: (r: ReconciliationReport) => void; onError: (err: unknown) => void },
): Reconciler {
  let last: ReconciliationReport | undefined;
  let running = false;
  const pass = async (): Promise<void> => {
    if (running) return;
    running = true;
    try {
      last = await reconcileSettled(src);
      opts.onReport(last);
    } catch (err) {
      opts.onError(err);
    } finally {
      running = false;
    }
  };
  const timer = opts.intervalMs > 0 ? setInterval(() => void pass(), opts.intervalMs) : undefined;
  timer?.unref();
  return {
    last: () => last,
    stop: () => {
      if (timer !== undefined) clearInterval(timer);
    },
  };
}
