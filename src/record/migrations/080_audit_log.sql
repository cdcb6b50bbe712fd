-- The audit log: who changed what, when, from where. Append-only and chained: each entry carries the
-- SHA-256 of its own contents and of the entry before it, so an edited, deleted or reordered entry breaks
-- the chain where it stands, and the newest hash (exported) makes a rewrite of the whole table visible.
--
-- Entries are written by triggers on the tables they record, so each is in the same transaction as the
-- change itself: no code path can change a key, a role or a budget and skip its entry. Who made the
-- change comes from the transaction-local setting `tollgate.actor` (JSON), which the database handle sets
-- from the request's context; a change with none is the system's. Events that change no row (sign-ins,
-- failed ones too) are inserted directly.

CREATE TABLE audit_log (
  -- The order entries were written in; seq, the chain's order, is given at commit.
  id           bigserial PRIMARY KEY,
  seq          bigint UNIQUE,
  at           timestamptz NOT NULL,
  -- The account (personal or organization) the entry is about; NULL for the deployment as a whole.
  account_id   text,
  actor_kind   text NOT NULL CHECK (actor_kind IN ('user', 'sso', 'admin_token', 'cli', 'system')),
  actor_id     text,
  actor_label  text,
  address      text,
  user_agent   text,
  action       text NOT NULL,
  target       text,
  before       jsonb,
  after        jsonb,
  request_id   text,
  prev_hash    text,
  hash         text
);
CREATE INDEX audit_log_by_account ON audit_log (account_id, seq);
CREATE INDEX audit_log_by_at ON audit_log (at);

-- The chain's head and, after pruning, its anchor: the hash of the last entry pruned, which the first
-- entry kept names as its prev_hash. One row.
CREATE TABLE audit_chain (
  one             boolean PRIMARY KEY DEFAULT true CHECK (one),
  head_seq        bigint NOT NULL,
  head_hash       text NOT NULL,
  pruned_through  bigint NOT NULL,
  pruned_hash     text NOT NULL
);
INSERT INTO audit_chain VALUES (true, 0, repeat('0', 64), 0, repeat('0', 64));

-- Who and when, as the entry is written.
CREATE FUNCTION audit_entry_written() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  actor jsonb := nullif(current_setting('tollgate.actor', true), '')::jsonb;
BEGIN
  NEW.seq := NULL;
  NEW.prev_hash := NULL;
  NEW.hash := NULL;
  NEW.at := date_trunc('milliseconds', clock_timestamp());
  IF NEW.actor_kind IS NULL THEN
    NEW.actor_kind := coalesce(actor->>'kind', 'system');
    NEW.actor_id := actor->>'id';
    NEW.actor_label := actor->>'label';
    NEW.address := actor->>'address';
    NEW.user_agent := actor->>'userAgent';
    NEW.request_id := coalesce(NEW.request_id, actor->>'requestId');
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER audit_log_written BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_entry_written();

-- Numbers the entry, links it to the head and hashes it, at commit (a deferred trigger): the head's row
-- lock is taken last and held only while the transaction commits, so it orders entries by commit without
-- ever waiting inside a transaction that holds other locks (no lock-order deadlock with the changes
-- themselves). The text hashed is the same expression `verify` sends (src/audit/chain.ts): keep the two
-- alike.
CREATE FUNCTION audit_chain_entry() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  head audit_chain;
  e audit_log;
BEGIN
  SELECT * INTO head FROM audit_chain FOR UPDATE;
  SELECT * INTO e FROM audit_log WHERE id = NEW.id;
  e.seq := head.head_seq + 1;
  e.prev_hash := head.head_hash;
  e.hash := encode(sha256(convert_to(jsonb_build_array(
    e.seq, to_char(e.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), e.account_id,
    e.actor_kind, e.actor_id, e.actor_label, e.address, e.user_agent, e.action, e.target,
    e.before, e.after, e.request_id, e.prev_hash)::text, 'UTF8')), 'hex');
  UPDATE audit_log SET seq = e.seq, prev_hash = e.prev_hash, hash = e.hash WHERE id = NEW.id;
  UPDATE audit_chain SET head_seq = e.seq, head_hash = e.hash;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER audit_log_chain AFTER INSERT ON audit_log DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION audit_chain_entry();

-- Append-only: no UPDATE but the chaining's own, no TRUNCATE, and DELETE only by the retention prune
-- (which moves the anchor in the same transaction). Someone with the database's superuser can still get
-- past this; `verify` is what catches them.
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'UPDATE' AND OLD.hash IS NULL AND pg_trigger_depth() > 1 THEN
    RETURN NEW;
  END IF;
  IF TG_OP = 'DELETE' AND current_setting('tollgate.audit_prune', true) = 'on' THEN
    RETURN OLD;
  END IF;
  RAISE EXCEPTION 'the audit log is append-only (% refused)', TG_OP;
END $$;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

-- One entry per changed row of a recorded table. TG_ARGV[0] names the columns that identify the row
-- (comma-separated, joined by '/'); the rest are columns never recorded: hashes of secrets, and
-- bookkeeping the hot path moves (spend, versions) which is not a change anyone made. An UPDATE that
-- moved only those writes nothing. A column named with a leading '~' is a secret whose change is itself
-- worth recording (a new password): its value shows as "[secret]", and "[secret, changed]" after a change.
CREATE FUNCTION audit_row_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  left_out text[] := coalesce(TG_ARGV[1:TG_NARGS - 1], '{}');
  col text;
  secret text;
  old_row jsonb;
  new_row jsonb;
  one_row jsonb;
  about text;
  target text;
BEGIN
  IF TG_OP <> 'INSERT' THEN old_row := to_jsonb(OLD) - ARRAY(SELECT ltrim(c, '~') FROM unnest(left_out) c); END IF;
  IF TG_OP <> 'DELETE' THEN new_row := to_jsonb(NEW) - ARRAY(SELECT ltrim(c, '~') FROM unnest(left_out) c); END IF;
  IF TG_OP = 'UPDATE' THEN
    FOREACH col IN ARRAY left_out LOOP
      CONTINUE WHEN left(col, 1) <> '~';
      secret := substr(col, 2);
      IF (to_jsonb(OLD)->secret) IS DISTINCT FROM (to_jsonb(NEW)->secret) THEN
        old_row := old_row || jsonb_build_object(secret, '[secret]');
        new_row := new_row || jsonb_build_object(secret, '[secret, changed]');
      END IF;
    END LOOP;
  END IF;
  IF TG_OP = 'UPDATE' AND old_row = new_row THEN RETURN NULL; END IF;
  one_row := coalesce(new_row, old_row);
  SELECT string_agg(one_row->>c, '/' ORDER BY n) INTO target
    FROM unnest(string_to_array(TG_ARGV[0], ',')) WITH ORDINALITY AS t (c, n);
  about := one_row->>'account_id';
  IF about IS NULL AND TG_TABLE_NAME = 'team_members' THEN
    SELECT account_id INTO about FROM teams WHERE id = one_row->>'team_id';
  ELSIF about IS NULL AND TG_TABLE_NAME = 'accounts' THEN
    about := one_row->>'id';
  END IF;
  INSERT INTO audit_log (account_id, action, target, before, after)
    VALUES (about, TG_TABLE_NAME || '.' || lower(TG_OP), target, old_row, new_row);
  RETURN NULL;
END $$;

-- What is recorded. The WHEN clauses keep the journal's statement triggers (spend on keys and teams) and
-- its usage postings from calling the function at all.
CREATE TRIGGER audit_accounts AFTER INSERT OR UPDATE OR DELETE ON accounts
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('id', 'limits_version', 'limits_hot_version');
CREATE TRIGGER audit_api_keys_insert AFTER INSERT OR DELETE ON api_keys
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('id', 'secret_hash', 'lifetime_spent', 'last_used_at', 'version', 'hot_version');
CREATE TRIGGER audit_api_keys_update AFTER UPDATE ON api_keys
  FOR EACH ROW WHEN (OLD.lifetime_spent = NEW.lifetime_spent)
  EXECUTE FUNCTION audit_row_change('id', 'secret_hash', 'lifetime_spent', 'last_used_at', 'version', 'hot_version');
CREATE TRIGGER audit_organizations AFTER INSERT OR UPDATE OR DELETE ON organizations
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('account_id');
CREATE TRIGGER audit_account_memberships AFTER INSERT OR UPDATE OR DELETE ON account_memberships
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('user_id');
CREATE TRIGGER audit_invitations AFTER INSERT OR UPDATE OR DELETE ON invitations
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('id', 'token_hash');
CREATE TRIGGER audit_teams_insert AFTER INSERT OR DELETE ON teams
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('id', 'lifetime_spent', 'version', 'hot_version');
CREATE TRIGGER audit_teams_update AFTER UPDATE ON teams
  FOR EACH ROW WHEN (OLD.lifetime_spent = NEW.lifetime_spent)
  EXECUTE FUNCTION audit_row_change('id', 'lifetime_spent', 'version', 'hot_version');
CREATE TRIGGER audit_team_members AFTER INSERT OR UPDATE OR DELETE ON team_members
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('team_id,user_id');
CREATE TRIGGER audit_member_budgets AFTER INSERT OR UPDATE OR DELETE ON member_budgets
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('user_id', 'version', 'hot_version');
CREATE TRIGGER audit_dashboard_users AFTER INSERT OR UPDATE OR DELETE ON dashboard_users
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('id', '~password_hash', 'totp_secret', 'totp_last_step');
CREATE TRIGGER audit_top_ups AFTER INSERT OR UPDATE OR DELETE ON top_ups
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('id', 'checkout_url', 'updated_at');
CREATE TRIGGER audit_auto_top_ups AFTER INSERT OR UPDATE OR DELETE ON auto_top_ups
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('account_id', 'customer_ref', 'payment_method_ref', 'updated_at');
CREATE TRIGGER audit_refund_tickets AFTER INSERT OR UPDATE OR DELETE ON refund_tickets
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('id');
CREATE TRIGGER audit_money_movements AFTER INSERT ON ledger_entries
  FOR EACH ROW WHEN (NEW.kind <> 'usage')
  EXECUTE FUNCTION audit_row_change('id', 'record_tx', 'applied_at');
-- Single sign-on's links (028): who the provider vouched for, and the organizations its mapping made.
-- The time of the last sign-in moves at every sign-in (its event is the entry).
CREATE TRIGGER audit_sso_identities AFTER INSERT OR UPDATE OR DELETE ON sso_identities
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('issuer,subject', 'last_sign_in_at');
CREATE TRIGGER audit_sso_organizations AFTER INSERT OR UPDATE OR DELETE ON sso_organizations
  FOR EACH ROW EXECUTE FUNCTION audit_row_change('name');
