-- Per-key rate limits (issue #32): requests and input+output tokens per minute, requests in flight.
-- Each is optional on a key; the account's default for keys applies where the key sets none. They reach
-- the hot path as key state does (015): a key's own limits with the key's version; the account's
-- defaults with limits_version, bumped on every change and pushed until limits_hot_version catches up.
ALTER TABLE api_keys ADD COLUMN rpm_limit bigint CHECK (rpm_limit > 0);
ALTER TABLE api_keys ADD COLUMN tpm_limit bigint CHECK (tpm_limit > 0);
ALTER TABLE api_keys ADD COLUMN concurrency_limit bigint CHECK (concurrency_limit > 0);
ALTER TABLE accounts ADD COLUMN default_rpm_limit bigint CHECK (default_rpm_limit > 0);
ALTER TABLE accounts ADD COLUMN default_tpm_limit bigint CHECK (default_tpm_limit > 0);
ALTER TABLE accounts ADD COLUMN default_concurrency_limit bigint CHECK (default_concurrency_limit > 0);
ALTER TABLE accounts ADD COLUMN limits_version bigint NOT NULL DEFAULT 1;
ALTER TABLE accounts ADD COLUMN limits_hot_version bigint NOT NULL DEFAULT 1;
CREATE INDEX accounts_limits_hot_pending ON accounts (id) WHERE limits_hot_version < limits_version;
