// A movement of money into or out of an account's balance (anything but usage, which the journal
// records): written to PostgreSQL first, inside the caller's transaction, and applied to the hot path
// (Redis) only after that commits. The idempotency key makes both halves safe to repeat.
import type { HotMovement, Micros } from '../billing/ledger.js';
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
  /** The record's transaction that wrote the entry (xid8 text; '0' for entries older than that column). */
  recordTx: string;
  /** The idempotency key was used before (with the same account, kind and amount): nothing was written. */
  duplicate: boolean;
  /** The hot path has taken the movement (ledger_entries.applied_at is set). */
  applied: boolean;
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
  const inserted = await tx.query<{ id: number; record_tx: string }>(
    `INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key, request_id, reference, memo)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (idempotency_key) DO NOTHING RETURNING id, record_tx`,
    [m.accountId, m.kind, m.amount, m.idempotencyKey, m.requestId ?? null, m.reference ?? null, m.memo ?? null],
  );
  const row = inserted.rows[0];
  if (row !== undefined) return { entryId: row.id, recordTx: row.record_tx, duplicate: false, applied: false };
  const existing = await tx.query<{ id: number; account_id: string; kind: string; amount: number; record_tx: string | null; applied: boolean }>(
    'SELECT id, account_id, kind, amount, record_tx, applied_at IS NOT NULL AS applied FROM ledger_entries WHERE idempotency_key = $1',
    [m.idempotencyKey],
  );
  const e = existing.rows[0];
  if (e === undefined || e.account_id !== m.accountId || e.kind !== m.kind || e.amount !== m.amount) throw new MovementConflict(m.idempotencyKey);
  return { entryId: e.id, recordTx: e.record_tx ?? '0', duplicate: true, applied: e.applied };
}

/**
 * The hot path's half of a committed movement (HotPathMovements.applyMovement): a refund counts as
 * refunded, everything else as money in (or taken back), as the seed of a wiped Redis counts them.
 */
export function hotMovementOf(m: MoneyMovement, recordTx: string): HotMovement {
  return { accountId: m.accountId, amount: m.amount, idempotencyKey: m.idempotencyKey, counts: m.kind === 'refund' ? 'refunded' : 'credited', recordTx };
}

/**
 * Notes a seq the account's Redis copy reached (lua/common.lua) once the record has what it was reached
 * with: a Redis later found below it lost writes the record has, and is loaded again.
 */
export async function recordHotSeq(db: Queryable, accountId: string, seq: number): Promise<void> {
  if (!(seq > 0)) return;
  await db.query(
    'INSERT INTO account_hot_seq (account_id, seq) VALUES ($1, $2) ON CONFLICT (account_id) DO UPDATE SET seq = GREATEST(account_hot_seq.seq, EXCLUDED.seq)',
    [accountId, seq],
  );
}

/** Marks a movement as taken by the hot path (the sweeper applies the ones never marked). */
export async function markApplied(db: Queryable, entryId: number): Promise<void> {
  await db.query('UPDATE ledger_entries SET applied_at = now() WHERE id = $1 AND applied_at IS NULL', [entryId]);
}
