-- Single sign-on through the company's OpenID Connect provider (issue 40, item 1).
--
-- A person the provider vouches for is its issuer and subject (the "sub" claim, stable where the
-- e-mail may change); the first sign-in links them to a dashboard user (made then, without a usable
-- password, or the existing user of that address in a domain the provider serves).
CREATE TABLE sso_identities (
  issuer          text NOT NULL,
  subject         text NOT NULL,
  user_id         text NOT NULL REFERENCES dashboard_users (id) ON DELETE CASCADE,
  -- The address and groups the provider gave at the last sign-in (what the mapping read).
  email           text NOT NULL,
  groups          text[] NOT NULL DEFAULT '{}',
  created_at      timestamptz NOT NULL DEFAULT now(),
  last_sign_in_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (issuer, subject)
);
CREATE UNIQUE INDEX sso_identities_user ON sso_identities (issuer, user_id);

-- The organizations the configuration's mapping names, by that name: made by the first sign-in that
-- maps to one, and from then on the provider decides who of its people belong and in which role.
-- Keyed by the configured name, not by organizations.name (which any user may choose for their own).
CREATE TABLE sso_organizations (
  name        text PRIMARY KEY,
  account_id  text NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- Sign-ins under way: the state (hashed), the nonce and the PKCE verifier, bound to the browser that
-- started them (the hash of a random value in a short-lived cookie). Single use: the callback deletes
-- the row it reads, so a replayed state finds nothing.
CREATE TABLE sso_logins (
  state_hash    text PRIMARY KEY,
  browser_hash  text NOT NULL,
  nonce         text NOT NULL,
  code_verifier text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  expires_at    timestamptz NOT NULL
);

-- How a session was opened ('password' or 'sso'): an SSO session's life is the shorter SSO one.
ALTER TABLE dashboard_sessions ADD COLUMN method text NOT NULL DEFAULT 'password' CHECK (method IN ('password', 'sso'));
