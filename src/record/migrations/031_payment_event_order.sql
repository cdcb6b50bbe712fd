-- Provider events may arrive in any order. An event about a payment no top-up has yet (a refund or a
-- dispute delivered before the payment's own event) is parked here, not dropped, and applied in the
-- transaction that records the payment. Its id stays in payment_provider_events, so a redelivery is
-- still a no-op.
CREATE TABLE parked_payment_events (
  provider     text NOT NULL,
  event_id     text NOT NULL,
  payment_ref  text NOT NULL,
  type         text NOT NULL,
  fact         jsonb NOT NULL,
  received_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (provider, event_id)
);
CREATE INDEX parked_payment_events_by_payment ON parked_payment_events (provider, payment_ref, received_at);

-- The refunded total as the provider last reported it (refunds can fail, so it can go down), and two
-- new states: cancelled (the payer left the checkout, which the provider was asked to close) and
-- reversed (a payment credited and then voided, such as a double-spent crypto payment).
ALTER TABLE top_ups ADD COLUMN refunded_cents bigint;
UPDATE top_ups t SET refunded_cents = e.cents
  FROM (SELECT top_up_id, max(amount_cents) AS cents FROM top_up_events WHERE kind IN ('refunded', 'refund_deferred') GROUP BY top_up_id) e
 WHERE e.top_up_id = t.id;
ALTER TABLE top_ups DROP CONSTRAINT top_ups_state_check;
ALTER TABLE top_ups ADD CONSTRAINT top_ups_state_check
  CHECK (state IN ('quoted', 'pending', 'cancelled', 'credited', 'failed', 'expired', 'refunded', 'disputed', 'reversed'));
