-- The highest seq of each account's Redis copy that the record has seen (src/billing/lua/common.lua):
-- every money change in Redis adds 1 to the account's seq, and the journal's commit keeps the highest
-- seq of the settlements it commits here. A Redis whose seq is lower lost writes the record has (a
-- restart from an older AOF or RDB, a failover to a lagging replica); the account is loaded again from
-- the record. A table of its own, upserted by the journal's postings statement, so the statement never
-- updates a row the ledger trigger updates too.
CREATE TABLE account_hot_seq (
  account_id  text PRIMARY KEY,
  seq         bigint NOT NULL
);
