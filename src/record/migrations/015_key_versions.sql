-- Key state (revocation, caps) reaches the hot path the way money movements do: committed here first,
-- then pushed to Redis, and kept until Redis has it. Every change bumps the key's version; the hot path
-- takes a copy only when its version is not older than the one it holds, so an older read (a cap edit
-- racing a revoke, a reload after a wipe) never writes over a newer one. hot_version is the newest
-- version the hot path is known to hold: a key with hot_version < version has a change still to push,
-- and every gateway's key sweeper pushes it.
ALTER TABLE api_keys ADD COLUMN version bigint NOT NULL DEFAULT 1;
ALTER TABLE api_keys ADD COLUMN hot_version bigint NOT NULL DEFAULT 1;
CREATE INDEX api_keys_hot_pending ON api_keys (id) WHERE hot_version < version;
