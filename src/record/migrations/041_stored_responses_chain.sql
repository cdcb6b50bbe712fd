-- A follow-up (previous_response_id) stores only what it adds to its previous response's context, and
-- names that response: the whole context is read back along the chain. Before, every follow-up kept the
-- whole context again, so a conversation's storage grew with the square of its turns. `bytes` is what a
-- response takes (its body, its own context, its input items and indexed items), for the per-account
-- bound; `context_length` is the length of its whole context, so the next follow-up knows where its own
-- part begins. Rows from before keep their whole context and no previous response.
ALTER TABLE stored_responses ADD COLUMN previous_id text;
ALTER TABLE stored_responses ADD COLUMN context_length integer;
ALTER TABLE stored_responses ADD COLUMN bytes bigint NOT NULL DEFAULT 0;
