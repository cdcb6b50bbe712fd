-- Organizations and members (issue 39): a user belongs to several accounts (their personal one and any
-- organizations), each with a role (src/dashboard/roles.ts); invitations by e-mail (single use, hashed
-- token, expiring); the account a session acts on; and the member who made each key.
--
-- Like dashboard_users.account_id, the account ids here do not reference accounts: the dashboard may
-- run over a hot-path account store the record does not hold (the tests' memory ledger).

-- An account with a name and members beyond its creator. Deleted ones stay (their account is on record).
CREATE TABLE organizations (
  account_id  text PRIMARY KEY,
  name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 100),
  created_by  text NOT NULL REFERENCES dashboard_users (id),
  created_at  timestamptz NOT NULL DEFAULT now(),
  deleted_at  timestamptz
);

CREATE TABLE account_memberships (
  account_id  text NOT NULL,
  user_id     text NOT NULL REFERENCES dashboard_users (id) ON DELETE CASCADE,
  role        text NOT NULL CHECK (role IN ('owner', 'admin', 'billing', 'member')),
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (account_id, user_id)
);
CREATE INDEX account_memberships_user ON account_memberships (user_id);

-- Every existing user owns the account they had (their personal one; the operators' for admins).
INSERT INTO account_memberships (account_id, user_id, role, created_at)
  SELECT account_id, id, 'owner', created_at FROM dashboard_users;

CREATE TABLE invitations (
  id          text PRIMARY KEY,
  account_id  text NOT NULL,
  email       text NOT NULL,
  role        text NOT NULL CHECK (role IN ('owner', 'admin', 'billing', 'member')),
  -- SHA-256 of the mailed token: the token itself is never stored.
  token_hash  text NOT NULL UNIQUE,
  invited_by  text NOT NULL REFERENCES dashboard_users (id),
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  accepted_at timestamptz,
  accepted_by text REFERENCES dashboard_users (id),
  revoked_at  timestamptz
);
-- One open invitation per address and organization (inviting again withdraws the one before).
CREATE UNIQUE INDEX invitations_open ON invitations (account_id, email) WHERE accepted_at IS NULL AND revoked_at IS NULL;

-- The account the session acts on (the account switcher); NULL: the user's personal account.
ALTER TABLE dashboard_sessions ADD COLUMN account_id text;

-- The member who made the key (NULL: the operator's keys, the admin API's, the local demo key). A later
-- team_id column can sit beside it.
ALTER TABLE api_keys ADD COLUMN owner_user_id text REFERENCES dashboard_users (id);
CREATE INDEX api_keys_by_owner ON api_keys (account_id, owner_user_id);
-- Keys of an account with exactly one user were that user's; the version bump lets the key sweepers
-- give the hot path the owner too.
UPDATE api_keys k SET owner_user_id = u.id, version = k.version + 1
  FROM dashboard_users u
 WHERE u.account_id = k.account_id
   AND (SELECT count(*) FROM dashboard_users w WHERE w.account_id = k.account_id) = 1;
