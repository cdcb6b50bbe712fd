-- Top-ups by card (Stripe Checkout) and crypto (BTCPay Server). Amounts in whole cents, as processors
-- charge them; the credit reaches the balance as a 'top_up' ledger entry in micro-USD.
CREATE TABLE top_ups (
  id            text PRIMARY KEY,
  account_id    text NOT NULL REFERENCES accounts (id),
  provider      text NOT NULL CHECK (provider IN ('stripe', 'btcpay')),
  -- The quote, stored before the checkout starts: the webhook credits exactly this.
  credit_cents  bigint NOT NULL CHECK (credit_cents >= 500),
  fee_cents     bigint NOT NULL CHECK (fee_cents >= 0),
  total_cents   bigint NOT NULL CHECK (total_cents = credit_cents + fee_cents),
  currency      text NOT NULL DEFAULT 'usd',
  -- quoted -> pending -> credited | failed | expired; credited -> refunded | disputed
  state         text NOT NULL CHECK (state IN ('quoted', 'pending', 'credited', 'failed', 'expired', 'refunded', 'disputed')),
  -- The provider's checkout session or invoice id, and its payment (Stripe's payment intent).
  provider_ref  text UNIQUE,
  payment_ref   text,
  checkout_url  text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  credited_at   timestamptz
);
CREATE INDEX top_ups_by_account ON top_ups (account_id, created_at DESC);
CREATE INDEX top_ups_by_payment ON top_ups (payment_ref) WHERE payment_ref IS NOT NULL;

-- Every step of a top-up, for its timeline: quoted, checkout started, paid, credited, refunded, ...
CREATE TABLE top_up_events (
  id           bigserial PRIMARY KEY,
  top_up_id    text NOT NULL REFERENCES top_ups (id),
  kind         text NOT NULL,
  amount_cents bigint,
  detail       text,
  created_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX top_up_events_by_top_up ON top_up_events (top_up_id, id);

-- Provider events already applied: a redelivery or a replay is a no-op.
CREATE TABLE payment_provider_events (
  provider     text NOT NULL,
  event_id     text NOT NULL,
  type         text NOT NULL,
  top_up_id    text,
  received_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (provider, event_id)
);
