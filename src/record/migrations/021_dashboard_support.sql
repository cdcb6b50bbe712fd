-- What the dashboard keeps beyond sign-in: refund tickets, the e-mail outbox, alert crossings, and
-- password-reset tokens (stored hashed, single use, expiring).
CREATE TABLE refund_tickets (
  id          text PRIMARY KEY,
  account_id  text NOT NULL REFERENCES accounts (id),
  request_id  text NOT NULL UNIQUE,
  reason      text NOT NULL,
  -- open -> approved | declined
  status      text NOT NULL CHECK (status IN ('open', 'approved', 'declined')),
  -- What the approval credited back (micro-USD).
  refunded    bigint,
  note        text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  decided_at  timestamptz,
  decided_by  text
);
CREATE INDEX refund_tickets_by_account ON refund_tickets (account_id, created_at DESC);
CREATE INDEX refund_tickets_open ON refund_tickets (created_at) WHERE status = 'open';

-- E-mail goes out through here: written in the same transaction as what it is about, sent by a worker.
CREATE TABLE email_outbox (
  id          bigserial PRIMARY KEY,
  recipient   text NOT NULL,
  subject     text NOT NULL,
  body        text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  sent_at     timestamptz,
  attempts    integer NOT NULL DEFAULT 0,
  last_error  text
);
CREATE INDEX email_outbox_unsent ON email_outbox (id) WHERE sent_at IS NULL;

-- One row per alert that has fired and not re-armed: an alert mails once per crossing.
CREATE TABLE alert_crossings (
  subject     text NOT NULL,
  kind        text NOT NULL,
  crossed_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (subject, kind)
);

CREATE TABLE password_resets (
  token_hash  text PRIMARY KEY,
  user_id     text NOT NULL REFERENCES dashboard_users (id) ON DELETE CASCADE,
  expires_at  timestamptz NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
