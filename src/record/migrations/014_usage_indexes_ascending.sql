-- The usage indexes of 010 in ascending order. Each account's (and key's) records arrive in time order,
-- so in an ascending index every new entry goes at the end of its account's run of entries, where
-- PostgreSQL (12 and later) splits a full leaf page just after the new entry and leaves the old page
-- full. In the descending order of 010 every new entry went at the start of its run, where a split
-- halves the page: the indexes grew about twice as large as their entries and cost the journal's
-- commit more pages, more WAL and about 1.7 µs more of PostgreSQL's time per record (one busy account;
-- about 0.4 µs with fifty). The newest-first listings read these backwards, as fast as forwards.
--
-- On a large usage_records table, build the two new indexes first by hand, without blocking the journal
-- (CREATE INDEX CONCURRENTLY ... with the same names and columns): this migration then keeps them and
-- only drops the old ones.
CREATE INDEX IF NOT EXISTS usage_records_by_account_asc ON usage_records (account_id, finished_at, request_id);
CREATE INDEX IF NOT EXISTS usage_records_by_key_asc ON usage_records (key_id, finished_at, request_id);
DROP INDEX IF EXISTS usage_records_by_account_time;
DROP INDEX IF EXISTS usage_records_by_key_time;
