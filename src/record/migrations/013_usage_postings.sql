-- Usage reaches the ledger as one posting per account per journal commit (src/record/journal.ts), not
-- one entry per request: the per-request detail is usage_records, and a second row per request (with
-- three index entries and a foreign-key lookup) was a third of PostgreSQL's work for each request.
-- Entries written before this migration stay as they are; both shapes sum to the same balance.
--
-- usage_records loses its foreign key to accounts: the journal's own statement inserts any account it
-- has not seen before the records, accounts are never deleted, and the per-row lookup cost about 4 µs of
-- the ~20 µs a record costs. ledger_entries keeps its key: money movements are few per request.
ALTER TABLE usage_records DROP CONSTRAINT IF EXISTS usage_records_account_id_fkey;
