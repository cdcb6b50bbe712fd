-- The time to the first token the client was sent, in milliseconds (streams), beside the finish
-- reason, HTTP status, upstream and model-refused flag the usage record already had columns for, and
-- which the journal now writes.
ALTER TABLE usage_records ADD COLUMN ttft_ms integer;
