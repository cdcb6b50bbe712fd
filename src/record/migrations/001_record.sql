-- The money of record. Amounts are bigint micro-USD; Redis is a cache of these tables that can be rebuilt.

CREATE TABLE accounts (
  id          text PRIMARY KEY,
  name        text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id              text PRIMARY KEY,
  account_id      text NOT NULL REFERENCES accounts (id),
  -- SHA-256 hex of the secret: the secret itself is never stored.
  secret_hash     text NOT NULL UNIQUE,
  -- What a holder is shown afterwards: `sk-tg-AbC` and the last four characters.
  display_prefix  text NOT NULL,
  last_four       text NOT NULL,
  name            text NOT NULL,
  lifetime_cap    bigint CHECK (lifetime_cap >= 0),
  monthly_cap     bigint CHECK (monthly_cap >= 0),
  created_at      timestamptz NOT NULL DEFAULT now(),
  revoked_at      timestamptz,
  last_used_at    timestamptz,
  -- Kept by the usage trigger below: what the key has been charged over its life.
  lifetime_spent  bigint NOT NULL DEFAULT 0
);
CREATE INDEX api_keys_by_account ON api_keys (account_id, created_at);

-- Every movement of money, signed: money in > 0, money out < 0. The idempotency key makes every writer
-- (journal, admin credit, webhook, refund) safe to repeat.
CREATE TABLE ledger_entries (
  id               bigserial PRIMARY KEY,
  account_id       text NOT NULL REFERENCES accounts (id),
  kind             text NOT NULL CHECK (kind IN ('top_up', 'admin_credit', 'refund', 'reversal',
                                                 'dispute_hold', 'dispute_release', 'usage', 'adjustment')),
  amount           bigint NOT NULL,
  idempotency_key  text NOT NULL UNIQUE,
  -- The request a usage or refund entry is about.
  request_id       text,
  -- What else it is about: a top-up id, a ticket id, a provider event id.
  reference        text,
  memo             text,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ledger_entries_by_account ON ledger_entries (account_id, id);
CREATE INDEX ledger_entries_by_request ON ledger_entries (request_id) WHERE request_id IS NOT NULL;

-- One row per request, settled or refused, keyed by the request id the client and the dashboard see.
CREATE TABLE usage_records (
  request_id           text PRIMARY KEY,
  account_id           text NOT NULL REFERENCES accounts (id),
  key_id               text NOT NULL,
  model                text NOT NULL,
  upstream             text,
  input_tokens         bigint NOT NULL DEFAULT 0,
  output_tokens        bigint NOT NULL DEFAULT 0,
  cached_input_tokens  bigint NOT NULL DEFAULT 0,
  reasoning_tokens     bigint NOT NULL DEFAULT 0,
  -- What was charged, and what the hold had reserved.
  cost                 bigint NOT NULL DEFAULT 0 CHECK (cost >= 0),
  reserved             bigint NOT NULL DEFAULT 0,
  -- completed | client_cancelled | upstream_failed | refused (a 402: refusal_reason says which limit)
  status               text NOT NULL,
  http_status          integer,
  finish_reason        text,
  refusal_reason       text,
  -- The model declined to answer (the holder may ask for a refund).
  model_refused        boolean NOT NULL DEFAULT false,
  -- The calendar month (UTC, YYYY-MM) whose cap the charge counts against: the hold's month.
  billing_month        text NOT NULL,
  started_at           timestamptz NOT NULL,
  finished_at          timestamptz NOT NULL,
  refunded_at          timestamptz
);
CREATE INDEX usage_records_by_account ON usage_records (account_id, finished_at DESC);
CREATE INDEX usage_records_by_key ON usage_records (key_id, finished_at DESC);

-- Per-account totals, kept in step with ledger_entries by a trigger, so a balance is one row read.
CREATE TABLE account_totals (
  account_id    text PRIMARY KEY REFERENCES accounts (id),
  balance       bigint NOT NULL DEFAULT 0,
  -- Money in: top-ups and admin credits.
  credited      bigint NOT NULL DEFAULT 0,
  -- Usage charges (a positive figure).
  charged       bigint NOT NULL DEFAULT 0,
  refunded      bigint NOT NULL DEFAULT 0,
  -- Reversals and dispute holds less releases (a positive figure is money taken back).
  reversed      bigint NOT NULL DEFAULT 0,
  -- The newest top-up's credit: low-balance alerts are measured against it.
  last_top_up   bigint,
  updated_at    timestamptz NOT NULL DEFAULT now()
);

-- Each key's spend per billing month, kept by the usage trigger (monthly caps are rebuilt from it).
CREATE TABLE key_month_spend (
  key_id   text NOT NULL,
  month    text NOT NULL,
  spent    bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (key_id, month)
);

CREATE FUNCTION ledger_entry_totals() RETURNS trigger AS $$
BEGIN
  INSERT INTO account_totals (account_id) VALUES (NEW.account_id) ON CONFLICT (account_id) DO NOTHING;
  UPDATE account_totals SET
    balance     = balance + NEW.amount,
    credited    = credited + CASE WHEN NEW.kind IN ('top_up', 'admin_credit') THEN NEW.amount ELSE 0 END,
    charged     = charged - CASE WHEN NEW.kind = 'usage' THEN NEW.amount ELSE 0 END,
    refunded    = refunded + CASE WHEN NEW.kind = 'refund' THEN NEW.amount ELSE 0 END,
    reversed    = reversed - CASE WHEN NEW.kind IN ('reversal', 'dispute_hold', 'dispute_release') THEN NEW.amount ELSE 0 END,
    last_top_up = CASE WHEN NEW.kind = 'top_up' THEN NEW.amount ELSE last_top_up END,
    updated_at  = now()
  WHERE account_id = NEW.account_id;
  RETURN NEW;
END $$ LANGUAGE plpgsql;

CREATE TRIGGER ledger_entries_totals AFTER INSERT ON ledger_entries
  FOR EACH ROW EXECUTE FUNCTION ledger_entry_totals();

CREATE FUNCTION usage_record_key_spend() RETURNS trigger AS $$
BEGIN
  IF NEW.cost > 0 THEN
    UPDATE api_keys SET lifetime_spent = lifetime_spent + NEW.cost WHERE id = NEW.key_id;
    INSERT INTO key_month_spend (key_id, month, spent) VALUES (NEW.key_id, NEW.billing_month, NEW.cost)
      ON CONFLICT (key_id, month) DO UPDATE SET spent = key_month_spend.spent + EXCLUDED.spent;
  END IF;
  RETURN NEW;
END $$ LANGUAGE plpgsql;

CREATE TRIGGER usage_records_key_spend AFTER INSERT ON usage_records
  FOR EACH ROW EXECUTE FUNCTION usage_record_key_spend();

CREATE FUNCTION account_created_totals() RETURNS trigger AS $$
BEGIN
  INSERT INTO account_totals (account_id) VALUES (NEW.id) ON CONFLICT (account_id) DO NOTHING;
  RETURN NEW;
END $$ LANGUAGE plpgsql;

CREATE TRIGGER accounts_totals AFTER INSERT ON accounts
  FOR EACH ROW EXECUTE FUNCTION account_created_totals();
