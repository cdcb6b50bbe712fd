-- Dashboard sign-in: people (users) who hold an account, and their server-side sessions.
-- Only hashes are stored: argon2id for passwords, SHA-256 for session ids.
CREATE TABLE dashboard_users (
  id            text PRIMARY KEY,
  email         text NOT NULL UNIQUE,
  password_hash text NOT NULL,
  role          text NOT NULL CHECK (role IN ('holder', 'admin')),
  account_id    text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dashboard_users_account ON dashboard_users (account_id);

CREATE TABLE dashboard_sessions (
  id_hash      text PRIMARY KEY,
  user_id      text NOT NULL REFERENCES dashboard_users (id) ON DELETE CASCADE,
  csrf_token   text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  expires_at   timestamptz NOT NULL,
  last_seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dashboard_sessions_user ON dashboard_sessions (user_id);
