-- Two-factor sign-in that can be turned off and recovered (issue 37, item 5): ten single-use recovery
-- codes per user, shown once at enrolment and kept only as SHA-256 digests (each code carries 80
-- random bits, so a fast hash is enough: there is nothing to guess from a digest), and the time each
-- was used.
CREATE TABLE totp_recovery_codes (
  user_id     text NOT NULL REFERENCES dashboard_users (id) ON DELETE CASCADE,
  code_hash   text NOT NULL,
  used_at     timestamptz,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (user_id, code_hash)
);
