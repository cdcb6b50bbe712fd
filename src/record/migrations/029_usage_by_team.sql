-- The Usage page, its CSV and the dashboard API filter by team (issue 39, item 5): a team's requests,
-- newest first and paged by (finished_at, request_id), and its totals over a month, are a range of
-- this index, not a filtered scan of the whole account's range. Only requests charged to a team have
-- an entry, so the journal writes nothing more for the usage of keys outside teams; a team's records
-- arrive in time order, so each new entry goes at the end of its run (as in 014).
CREATE INDEX usage_records_by_team ON usage_records (team_id, finished_at, request_id) WHERE team_id IS NOT NULL;
