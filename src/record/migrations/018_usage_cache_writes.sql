-- Prompt-cache writes, by how long the cache is kept, beside the cache reads the usage record already
-- had (cached_input_tokens). Each is a part of input_tokens and apart from the others, and each is
-- priced on its own (the catalog's cacheRead, cacheWrite5m, cacheWrite1h): the record shows the split
-- the cost was computed from. Rows written before this have no writes recorded (0).
ALTER TABLE usage_records
  ADD COLUMN cache_write_5m_tokens bigint NOT NULL DEFAULT 0,
  ADD COLUMN cache_write_1h_tokens bigint NOT NULL DEFAULT 0;
