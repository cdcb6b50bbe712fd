-- Automatic top-ups: a holder saves a card with the provider and sets a threshold, an amount and a
-- monthly maximum; when the balance of record falls below the threshold one off-session payment is
-- made (a top-up of origin 'auto', credited by its webhook like any other). At most one is in flight
-- per account, which the partial unique index enforces.
CREATE TABLE auto_top_ups (
  account_id          text PRIMARY KEY REFERENCES accounts (id),
  enabled             boolean NOT NULL DEFAULT false,
  threshold_cents     bigint NOT NULL DEFAULT 500 CHECK (threshold_cents >= 0),
  amount_cents        bigint NOT NULL DEFAULT 2000 CHECK (amount_cents >= 500),
  monthly_max_cents   bigint NOT NULL DEFAULT 10000 CHECK (monthly_max_cents >= 0),
  provider            text NOT NULL DEFAULT 'stripe',
  customer_ref        text,
  payment_method_ref  text,
  card_label          text,
  -- Why it was turned off (a decline, a bank asking for authentication), shown on the Balance page.
  disabled_reason     text,
  updated_at          timestamptz NOT NULL DEFAULT now()
);

-- A card being saved through the provider's hosted page, finished when the holder comes back.
CREATE TABLE card_setups (
  id            text PRIMARY KEY,
  account_id    text NOT NULL REFERENCES accounts (id),
  checkout_ref  text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  completed_at  timestamptz
);

ALTER TABLE top_ups ADD COLUMN origin text NOT NULL DEFAULT 'checkout' CHECK (origin IN ('checkout', 'auto'));
CREATE UNIQUE INDEX top_ups_one_auto_in_flight ON top_ups (account_id) WHERE origin = 'auto' AND state IN ('quoted', 'pending');
