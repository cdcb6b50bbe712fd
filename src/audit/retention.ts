// Retention: entries older than the operator's period (TOLLGATE_AUDIT_RETENTION_DAYS) are pruned once a
// day, the chain's anchor kept (chain.ts), so what remains still verifies and its head still counts every
// entry ever written. Every gateway with the record runs it; a prune takes the head's lock, so two at
// once prune once.
import { asActor } from '../record/change-actor.js';
import type { Database } from '../record/database.js';
import { pruneChain } from './chain.js';

export const DAY_MS = 24 * 3600 * 1000;

export interface AuditRetention {
  stop(): void;
}

/** Prunes what is older than `retentionDays` now and then every `intervalMs` (a day); 0 days keeps everything. */
export function startAuditRetention(
  db: Database,
  opts: { retentionDays: number; intervalMs?: number; now?: () => number; onPruned?: (n: number) => void; onError: (err: unknown) => void },
): AuditRetention {
  if (!(opts.retentionDays > 0)) return { stop: () => undefined };
  const now = opts.now ?? Date.now;
  let running = false;
  const pass = async (): Promise<void> => {
    if (running) return;
    running = true;
    try {
      const n = await asActor({ kind: 'system', label: 'audit log retention' }, () => pruneChain(db, new Date(now() - opts.retentionDays * DAY_MS)));
      if (n > 0) opts.onPruned?.(n);
    } catch (err) {
      opts.onError(err);
    } finally {
      running = false;
    }
  };
  // The first pass soon after start (a process restarted daily still prunes), then daily.
  const first = setTimeout(() => void pass(), 60_000);
  first.unref();
  const timer = setInterval(() => void pass(), opts.intervalMs ?? DAY_MS);
  timer.unref();
  return {
    stop: () => {
      clearTimeout(first);
      clearInterval(timer);
    },
  };
}
