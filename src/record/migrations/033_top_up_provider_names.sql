-- Payment providers are a registry in the code (src/top-ups/providers/index.ts): a new one is its module
-- and one line there, so the record no longer lists them. A provider's name keeps the shape the
-- registry requires of it (PROVIDER_NAME in src/top-ups/provider-module.ts).
ALTER TABLE top_ups DROP CONSTRAINT top_ups_provider_check;
ALTER TABLE top_ups ADD CONSTRAINT top_ups_provider_name CHECK (provider ~ '^[a-z][a-z0-9_-]{0,31}$');
