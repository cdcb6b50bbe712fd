// A movement of money into or out of an account's balance (anything but usage, which the journal
// records): written to PostgreSQL first, inside the caller's transaction, and applied to the hot path
// (Redis) only after that commits. The idempotency key makes both halves safe to repeat.
import type { Micros } from '../catalog/snapshot.js';
import type { Queryable } from './database.js';

export type MovementKind = 'top_up' | 'admin_credit' | 'refund' | 'reversal' | 'dispute_hold' | 'dispute_release' | 'adjustment';

export interface MoneyMovement {
  accountId: string;
  kind: MovementKind;
  /** Signed micro-USD: money in > 0, money taken back < 0. */
  amount: Micros;
  /** Unique across the whole ledger: a repeat with the same key is a no-op, never a second movement. */
  idempotencyKey: string;
  /** The request a refund is about. */
  requestId?: string;
  /** What else it is about: a top-up id, a ticket id, a provider event id. */
  reference?: string;
  memo?: string;
}

export interface RecordedMovement {
  entryId: number;
  /** The idempotency key was used before (with the same account, kind and amount): nothing was written. */
  duplicate: boolean;
}

/** The same idempotency key came back with a different account, kind or amount. */
export class MovementConflict extends Error {
  constructor(readonly idempotencyKey: string) {
    super(`idempotency key ${idempotencyKey} was already used for a different movement`);
    this.name = 'MovementConflict';
  }
}

/** Writes the ledger entry in `tx` (the caller's transaction), once per idempotency key. */
export async function recordMovement(tx: Queryable, m: MoneyMovement): Promise<RecordedMovement> {
  if (!Number.isSafeInteger(m.amount) || m.amount === 0) throw new RangeError('a movement is a non-zero whole number of micro-USD');
  if (m.idempotencyKey === '') throw new Error('a movement needs an idempotency key');
  const inserted = await tx.query<{ id: number }>(
    `INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key, request_id, reference, memo)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (idempotency_key) DO NOTHING RETURNING id`,
    [m.accountId, m.kind, m.amount, m.idempotencyKey, m.requestId ?? null, m.reference ?? null, m.memo ?? null],
  );
  const row = inserted.rows[0];
  if (row !== undefined) return { entryId: row.id, duplicate: false };
  const existing = await tx.query<{ id: number; account_id: string; kind: string; amount: number }>(
    'SELECT id, account_id, kind, amount FROM ledger_entries WHERE idempotency_key = $1',
    [m.idempotencyKey],
  );
  const e = existing.rows[0];
  if (e === undefined || e.account_id !== m.accountId || e.kind !== m.kind || e.amount !== m.amount) throw new MovementConflict(m.idempotencyKey);
  return { entryId: e.id, duplicate: true };
}

/**
 * The hot path's half: tells Redis (or the memory ledger) of a movement already committed to
 * PostgreSQL. Idempotent on the movement's key; a failure is retried later by a sweeper that re-applies
 * every committed movement Redis has not confirmed, so a caller may ignore a rejection after commit.
 */
export interface HotPathMovements {
  apply(m: MoneyMovement): Promise<void>;
}
