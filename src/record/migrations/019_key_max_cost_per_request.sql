-- A key's default cost ceiling per request (issue #39, item 4), in micro-USD: the most one request with
-- the key may cost when its x-tollgate-max-cost-usd header sets none (a header above it is capped at it).
-- Optional; it reaches the hot path as the caps do (015): with the key's version, pushed until
-- hot_version catches up.
ALTER TABLE api_keys ADD COLUMN max_cost_per_request bigint CHECK (max_cost_per_request >= 0);
