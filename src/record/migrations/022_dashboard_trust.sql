-- Accounts you can trust: a confirmed e-mail address before keys or top-ups, optional TOTP, sessions
-- that know whether they were opened with the second factor, and one-time key reveals after a redirect.

-- NULL: the address was never confirmed. Users that exist now were signed up unverified, except the
-- operator's own (admins), which were provisioned from configuration.
ALTER TABLE dashboard_users ADD COLUMN email_verified_at timestamptz;
UPDATE dashboard_users SET email_verified_at = created_at WHERE role = 'admin';
-- The TOTP secret (base32), set once enrolment is confirmed with a code; the last time step accepted,
-- so a code cannot be used twice.
ALTER TABLE dashboard_users ADD COLUMN totp_secret text;
ALTER TABLE dashboard_users ADD COLUMN totp_enabled_at timestamptz;
ALTER TABLE dashboard_users ADD COLUMN totp_last_step bigint;

ALTER TABLE dashboard_sessions ADD COLUMN second_factor boolean NOT NULL DEFAULT false;

-- E-mail confirmation links (stored hashed, single use, expiring), like password resets.
CREATE TABLE email_verifications (
  token_hash  text PRIMARY KEY,
  user_id     text NOT NULL REFERENCES dashboard_users (id) ON DELETE CASCADE,
  expires_at  timestamptz NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX email_verifications_user ON email_verifications (user_id);

-- A new key's secret between the POST that made it and the GET that shows it once: encrypted with a
-- key that only the creating browser holds (a short-lived cookie), so the record never holds a usable
-- secret, and deleted when shown.
CREATE TABLE key_reveals (
  id           text PRIMARY KEY,
  session_hash text NOT NULL REFERENCES dashboard_sessions (id_hash) ON DELETE CASCADE,
  sealed       text NOT NULL,
  expires_at   timestamptz NOT NULL
);
