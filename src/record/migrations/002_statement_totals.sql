-- The totals triggers of 001, per statement instead of per row: the journal inserts hundreds of usage
-- records and ledger entries in one statement, and a row trigger updated the same account_totals row
-- (and the same key's spend) once per record. Now each statement updates each account, key and month
-- once, with the sums of its rows. Same results for single-row inserts. Accounts and keys are updated in
-- id order, so two writers never take them in opposite orders.

CREATE FUNCTION ledger_entries_totals_stmt() RETURNS trigger AS $$
DECLARE
  s record;
BEGIN
  FOR s IN
    SELECT account_id,
           sum(amount) AS amount,
           sum(CASE WHEN kind IN ('top_up', 'admin_credit') THEN amount ELSE 0 END) AS credited,
           -sum(CASE WHEN kind = 'usage' THEN amount ELSE 0 END) AS charged,
           sum(CASE WHEN kind = 'refund' THEN amount ELSE 0 END) AS refunded,
           -sum(CASE WHEN kind IN ('reversal', 'dispute_hold', 'dispute_release') THEN amount ELSE 0 END) AS reversed,
           (array_agg(amount ORDER BY id DESC) FILTER (WHERE kind = 'top_up'))[1] AS last_top_up
      FROM new_entries GROUP BY account_id ORDER BY account_id
  LOOP
    INSERT INTO account_totals (account_id) VALUES (s.account_id) ON CONFLICT (account_id) DO NOTHING;
    UPDATE account_totals SET
      balance     = balance + s.amount,
      credited    = credited + s.credited,
      charged     = charged + s.charged,
      refunded    = refunded + s.refunded,
      reversed    = reversed + s.reversed,
      last_top_up = COALESCE(s.last_top_up, last_top_up),
      updated_at  = now()
    WHERE account_id = s.account_id;
  END LOOP;
  RETURN NULL;
END $$ LANGUAGE plpgsql;

DROP TRIGGER ledger_entries_totals ON ledger_entries;
CREATE TRIGGER ledger_entries_totals AFTER INSERT ON ledger_entries
  REFERENCING NEW TABLE AS new_entries
  FOR EACH STATEMENT EXECUTE FUNCTION ledger_entries_totals_stmt();
DROP FUNCTION ledger_entry_totals();

CREATE FUNCTION usage_records_key_spend_stmt() RETURNS trigger AS $$
DECLARE
  s record;
BEGIN
  FOR s IN SELECT key_id, sum(cost) AS cost FROM new_records WHERE cost > 0 GROUP BY key_id ORDER BY key_id LOOP
    UPDATE api_keys SET lifetime_spent = lifetime_spent + s.cost WHERE id = s.key_id;
  END LOOP;
  INSERT INTO key_month_spend (key_id, month, spent)
    SELECT key_id, billing_month, sum(cost) FROM new_records WHERE cost > 0 GROUP BY key_id, billing_month ORDER BY key_id, billing_month
    ON CONFLICT (key_id, month) DO UPDATE SET spent = key_month_spend.spent + EXCLUDED.spent;
  RETURN NULL;
END $$ LANGUAGE plpgsql;

DROP TRIGGER usage_records_key_spend ON usage_records;
CREATE TRIGGER usage_records_key_spend AFTER INSERT ON usage_records
  REFERENCING NEW TABLE AS new_records
  FOR EACH STATEMENT EXECUTE FUNCTION usage_records_key_spend_stmt();
DROP FUNCTION usage_record_key_spend();
