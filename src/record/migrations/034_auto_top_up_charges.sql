-- Automatic top-ups obey their holder (issue 37, item 3). Each automatic top-up keeps the card it was
-- quoted for, so a retry after a provider call that got no answer charges that card under the same
-- idempotency key (never another card), and its attempts: whether a charge may have reached the
-- provider, when the last one went, and why it got no answer.
CREATE TABLE auto_top_up_charges (
  top_up_id           text PRIMARY KEY REFERENCES top_ups (id),
  customer_ref        text NOT NULL,
  payment_method_ref  text NOT NULL,
  card_label          text,
  attempts            integer NOT NULL DEFAULT 0,
  last_attempt_at     timestamptz,
  last_error          text
);

-- Automatic top-ups quoted and never answered by the provider before this change know no card of their
-- own: they are abandoned (a payment the provider did make is still credited when its event arrives,
-- since a cancelled top-up can be paid), rather than charged on whatever card is on file now.
INSERT INTO top_up_events (top_up_id, kind, amount_cents, detail)
SELECT id, 'abandoned', NULL, 'not charged: the payment provider never answered; nothing more will be tried'
  FROM top_ups WHERE origin = 'auto' AND state = 'quoted';
UPDATE top_ups SET state = 'cancelled', updated_at = now() WHERE origin = 'auto' AND state = 'quoted';
