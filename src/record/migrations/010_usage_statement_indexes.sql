-- Indexes for the usage and statement queries (src/record/usage-query.ts, statement.ts).
-- Usage is listed newest first and paged by a (finished_at, request_id) cursor: the indexes of 001
-- lacked the tie-breaker, so a page boundary inside one millisecond meant a sort of that whole range.
-- "This account's last 30 days" and "this key this month" are range scans of these two.
CREATE INDEX usage_records_by_account_time ON usage_records (account_id, finished_at DESC, request_id DESC);
CREATE INDEX usage_records_by_key_time ON usage_records (key_id, finished_at DESC, request_id DESC);
DROP INDEX usage_records_by_account;
DROP INDEX usage_records_by_key;

-- A statement's running balance sums an account's older entries: with the amount in the index that sum
-- reads the index alone, not the table.
CREATE INDEX ledger_entries_by_account_amount ON ledger_entries (account_id, id) INCLUDE (amount);
DROP INDEX ledger_entries_by_account;
