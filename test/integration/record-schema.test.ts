// The schema of record on both engines it runs on: a real PostgreSQL (the test server) and the embedded
// PGlite of the local run. The totals triggers keep balances and key spend in step with the rows.
import { describe, expect, it } from 'vitest';
import { openPglite, type Database } from '../../src/record/database.js';
import { loadMigrations, migrate } from '../../src/record/migrate.js';
import { useTestDatabase } from '../helpers/test-database.js';

const pgTest = useTestDatabase('record_schema');

async function exercise(db: Database): Promise<void> {
  await db.query(`INSERT INTO accounts (id, name) VALUES ('acct_a', 'a')`);
  await db.query(
    `INSERT INTO api_keys (id, account_id, secret_hash, display_prefix, last_four, name, monthly_cap)
     VALUES ('key_a', 'acct_a', 'h', 'sk-tg-abc', 'wxyz', 'ci', 5000000)`,
  );
  await db.query(`INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key) VALUES ('acct_a', 'top_up', 10000000, 't1')`);
  await db.transaction(async (tx) => {
    await tx.query(
      `INSERT INTO usage_records (request_id, account_id, key_id, model, cost, reserved, status, billing_month, started_at, finished_at)
       VALUES ('req_1', 'acct_a', 'key_a', 'm', 1234, 5000, 'completed', '2026-11', now(), now())`,
    );
    await tx.query(`INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key, request_id) VALUES ('acct_a', 'usage', -1234, 'usage:req_1', 'req_1')`);
  });
  // A repeated idempotency key is refused by the database itself, and ON CONFLICT makes it a no-op.
  await expect(db.query(`INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key) VALUES ('acct_a', 'top_up', 1, 't1')`)).rejects.toThrow();
  const again = await db.query(`INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key) VALUES ('acct_a', 'top_up', 1, 't1') ON CONFLICT (idempotency_key) DO NOTHING`);
  expect(again.rowCount).toBe(0);
  // A transaction that throws leaves nothing behind.
  await expect(
    db.transaction(async (tx) => {
      await tx.query(`INSERT INTO ledger_entries (account_id, kind, amount, idempotency_key) VALUES ('acct_a', 'admin_credit', 99, 'rolled-back')`);
      throw new Error('boom');
    }),
  ).rejects.toThrow('boom');

  const totals = (await db.query<{ balance: number; credited: number; charged: number; last_top_up: number }>(`SELECT * FROM account_totals WHERE account_id = 'acct_a'`)).rows[0];
  expect(totals).toMatchObject({ balance: 10_000_000 - 1234, credited: 10_000_000, charged: 1234, last_top_up: 10_000_000 });
  expect(typeof totals?.balance).toBe('number');
  const key = (await db.query<{ lifetime_spent: number }>(`SELECT lifetime_spent FROM api_keys WHERE id = 'key_a'`)).rows[0];
  expect(key?.lifetime_spent).toBe(1234);
  const month = (await db.query<{ spent: number }>(`SELECT spent FROM key_month_spend WHERE key_id = 'key_a' AND month = '2026-11'`)).rows[0];
  expect(month?.spent).toBe(1234);
  // Re-running the migrations applies nothing.
  expect(await migrate(db)).toEqual([]);
}

describe('schema of record', () => {
  it('on PostgreSQL: totals and key spend follow the rows, idempotency keys are unique', async () => {
    await exercise(pgTest.db);
  });

  it('on PGlite (the local run): the same', async () => {
    const db = await openPglite();
    try {
      expect(await migrate(db)).toEqual(loadMigrations().map((m) => m.name));
      await exercise(db);
    } finally {
      await db.close();
    }
  });

  it('refuses a bigint past the largest exact integer instead of rounding it', async () => {
    const r = pgTest.db.query(`SELECT 9007199254740993::bigint AS x`);
    await expect(r).rejects.toThrow(RangeError);
  });
});
