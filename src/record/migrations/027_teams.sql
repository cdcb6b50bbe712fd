-- Teams and budgets (issue 39, item 3): named groups of an account's members and keys, each with a
-- lifetime and a monthly budget; and each member's budgets in an account. The budgets and the spend
-- they are weighed against are kept here, so a hot path that lost them (a wiped Redis) is given them
-- back: the budgets by the same versioned push as key state (015), the spend by the seed.
--
-- A key belongs to at most one team (api_keys.team_id); a member may be in any number of teams
-- (team_members), which only says where they may put their own keys. A request is charged to the team
-- its key was in when it was reserved: usage_records.team_id, written by the journal, and a trigger
-- keeps each team's spend as the key-spend trigger keeps a key's. A member's spend is the spend of the
-- keys they own (api_keys.owner_user_id never changes), so it needs no table of its own.

CREATE TABLE teams (
  id               text PRIMARY KEY,
  account_id       text NOT NULL,
  name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 60),
  lifetime_budget  bigint CHECK (lifetime_budget >= 0),
  monthly_budget   bigint CHECK (monthly_budget >= 0),
  -- Everything charged to the team, kept by the usage trigger below.
  lifetime_spent   bigint NOT NULL DEFAULT 0,
  created_at       timestamptz NOT NULL DEFAULT now(),
  -- A deleted team keeps its row (its usage names it); its keys leave it.
  deleted_at       timestamptz,
  -- As api_keys (015): every change bumps version; the hot path has hot_version.
  version          bigint NOT NULL DEFAULT 1,
  hot_version      bigint NOT NULL DEFAULT 0
);
CREATE INDEX teams_by_account ON teams (account_id);
CREATE UNIQUE INDEX teams_name ON teams (account_id, lower(name)) WHERE deleted_at IS NULL;
CREATE INDEX teams_hot_pending ON teams (id) WHERE hot_version < version;

-- No foreign key, as usage_records.team_id: the journal's commit never waits on a team's row.
CREATE TABLE team_month_spend (
  team_id  text NOT NULL,
  month    text NOT NULL,
  spent    bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (team_id, month)
);

CREATE TABLE team_members (
  team_id   text NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
  user_id   text NOT NULL REFERENCES dashboard_users (id) ON DELETE CASCADE,
  added_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (team_id, user_id)
);
CREATE INDEX team_members_by_user ON team_members (user_id);

-- A member's budgets in one account (no row: none).
CREATE TABLE member_budgets (
  account_id       text NOT NULL,
  user_id          text NOT NULL REFERENCES dashboard_users (id) ON DELETE CASCADE,
  lifetime_budget  bigint CHECK (lifetime_budget >= 0),
  monthly_budget   bigint CHECK (monthly_budget >= 0),
  version          bigint NOT NULL DEFAULT 1,
  hot_version      bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (account_id, user_id)
);
CREATE INDEX member_budgets_hot_pending ON member_budgets (account_id, user_id) WHERE hot_version < version;

ALTER TABLE api_keys ADD COLUMN team_id text REFERENCES teams (id);
CREATE INDEX api_keys_by_team ON api_keys (team_id) WHERE team_id IS NOT NULL;

-- No foreign key: the journal's COPY stays one statement whatever happens to the team.
ALTER TABLE usage_records ADD COLUMN team_id text;

CREATE FUNCTION usage_records_team_spend_stmt() RETURNS trigger AS $$
DECLARE
  s record;
BEGIN
  FOR s IN SELECT team_id, sum(cost) AS cost FROM new_records WHERE cost > 0 AND team_id IS NOT NULL GROUP BY team_id ORDER BY team_id LOOP
    UPDATE teams SET lifetime_spent = lifetime_spent + s.cost WHERE id = s.team_id;
  END LOOP;
  INSERT INTO team_month_spend (team_id, month, spent)
    SELECT team_id, billing_month, sum(cost) FROM new_records WHERE cost > 0 AND team_id IS NOT NULL
     GROUP BY team_id, billing_month ORDER BY team_id, billing_month
    ON CONFLICT (team_id, month) DO UPDATE SET spent = team_month_spend.spent + EXCLUDED.spent;
  RETURN NULL;
END $$ LANGUAGE plpgsql;

CREATE TRIGGER usage_records_team_spend AFTER INSERT ON usage_records
  REFERENCING NEW TABLE AS new_records
  FOR EACH STATEMENT EXECUTE FUNCTION usage_records_team_spend_stmt();
