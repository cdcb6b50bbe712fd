-- Responses API objects kept for previous_response_id, item_reference, GET and input_items (store is
-- true unless the client says false). Per account; kept 30 days (see README).
CREATE TABLE stored_responses (
  id          text PRIMARY KEY,
  account_id  text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  -- The response object as the client got it.
  body        jsonb NOT NULL,
  -- Every item a follow-up continues from: the earlier context, this request's input, this output
  -- (reasoning with its signed envelope).
  context     jsonb NOT NULL,
  -- This request's input items, with ids (GET /v1/responses/{id}/input_items).
  input_items jsonb NOT NULL
);
CREATE INDEX stored_responses_by_account ON stored_responses (account_id, created_at);
CREATE INDEX stored_responses_by_age ON stored_responses (created_at);

-- Output and input items by id, for item_reference.
CREATE TABLE stored_response_items (
  account_id  text NOT NULL,
  id          text NOT NULL,
  response_id text NOT NULL REFERENCES stored_responses (id) ON DELETE CASCADE,
  item        jsonb NOT NULL,
  PRIMARY KEY (account_id, id)
);
CREATE INDEX stored_response_items_by_response ON stored_response_items (response_id);
