// The ledger with PostgreSQL as the record of money in: a credit commits its ledger entry there first
// (once per idempotency key), then the hot path applies it under the same key, so a credit Redis never
// saw is still on the record and a repeat never counts twice. Everything else is the hot path's.
import { DelegatingLedger } from '../billing/delegating-ledger.js';
import type { Ledger, Micros } from '../billing/ledger.js';
import type { Database } from './database.js';
import { recordMovement, type MovementKind } from './money-movement.js';

export class RecordedLedger extends DelegatingLedger {
  constructor(
    inner: Ledger,
    private readonly db: Database,
    private readonly kind: MovementKind = 'admin_credit',
  ) {
    super(inner);
  }

  override async credit(accountId: string, amount: Micros, idempotencyKey: string): Promise<boolean> {
    if (!Number.isSafeInteger(amount) || amount <= 0) return this.inner.credit(accountId, amount, idempotencyKey);
    await this.db.transaction((tx) => recordMovement(tx, { accountId, kind: this.kind, amount, idempotencyKey }));
    // Committed: the hot path's own idempotency key makes a repeat (or a retry after a crash here) a no-op.
    return this.inner.credit(accountId, amount, idempotencyKey);
  }
}
