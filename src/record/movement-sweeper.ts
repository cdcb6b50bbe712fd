// The movement sweeper: money movements the record committed whose hot-path step failed (Redis down or
// timing out right after the COMMIT) are found by their empty applied_at and applied again, each once
// (the hot path keeps a marker per idempotency key, so a sweep racing the original step, or two
// gateways' sweeps, still move the money once).
import type { Database } from './database.js';
import type { MoneyMovement, MovementKind, RecordedMovement } from './money-movement.js';

export interface MovementSweeperOptions {
  db: Database;
  /** The hot path's half (RecordedLedger.applyCommitted): true when the hot path has the movement now. */
  apply: (m: MoneyMovement, recorded: RecordedMovement) => Promise<boolean>;
  intervalMs: number;
  /** A movement younger than this is left to the call that committed it. */
  graceMs?: number;
  /** Movements per pass. */
  batch?: number;
}

export interface MovementSweeper {
  /** One pass now: how many pending movements the hot path took. */
  sweep(): Promise<number>;
  stop(): void;
}

interface PendingRow {
  id: number;
  account_id: string;
  kind: MovementKind;
  amount: number;
  idempotency_key: string;
  request_id: string | null;
  record_tx: string | null;
}

export function startMovementSweeper(opts: MovementSweeperOptions): MovementSweeper {
  let running: Promise<number> | undefined;
  const pass = async (): Promise<number> => {
    const pending = await opts.db.query<PendingRow>(
      `SELECT id, account_id, kind, amount, idempotency_key, request_id, record_tx FROM ledger_entries
        WHERE applied_at IS NULL AND kind <> 'usage' AND created_at < now() - $1::int * interval '1 millisecond'
        ORDER BY id LIMIT $2`,
      [opts.graceMs ?? 2_000, opts.batch ?? 500],
    );
    let applied = 0;
    for (const r of pending.rows) {
      const m: MoneyMovement = { accountId: r.account_id, kind: r.kind, amount: r.amount, idempotencyKey: r.idempotency_key, ...(r.request_id === null ? {} : { requestId: r.request_id }) };
      if (await opts.apply(m, { entryId: r.id, recordTx: r.record_tx ?? '0', duplicate: false, applied: false })) applied++;
    }
    return applied;
  };
  const sweep = (): Promise<number> => {
    // One pass at a time; a failed read (the record down) waits for the next tick.
    running ??= pass()
      .catch(() => 0)
      .finally(() => {
        running = undefined;
      });
    return running;
  };
  const timer = setInterval(() => void sweep(), opts.intervalMs);
  timer.unref();
  return { sweep, stop: () => clearInterval(timer) };
}
