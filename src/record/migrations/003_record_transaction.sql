-- The record's transaction that wrote each ledger entry (pg_current_xact_id as text): a hot path seeded
-- from the record keeps the snapshot its figures were read at, and applies a movement only when the
-- movement's transaction is not in that snapshot, so a wipe between commit and apply counts it once.
ALTER TABLE ledger_entries ADD COLUMN record_tx text DEFAULT (pg_current_xact_id()::text);
