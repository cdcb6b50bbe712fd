-- Writes an API key's record (name, caps, revocation, team) as the record (PostgreSQL) has it at `version`,
-- unless the hot path already holds a newer version: copies pushed out of order (a cap edit racing a
-- revoke, a reload that read the record before a revoke) never bring an older state back. The key's
-- spend and holds are left as they are.
-- KEYS: 1 key hash, 2 the account's key list (zset); ARGV: 1 version ('' writes whatever is there), 2
--       created at (ms), 3 key id,
--       then field, value pairs (id, accountId, name, hint, createdAt, and the caps, revokedAt and the
--       rate limits rpm, tpm, conc, the cost ceiling per request maxCost and the team when set)
-- Returns 1 when written, 0 when a newer (or the same) version was there already.
local version = tonumber(ARGV[1])
if version then
  local current = tonumber(redis.call('HGET', KEYS[1], 'ver'))
  if current and current > version then return 0 end
end
redis.call('HDEL', KEYS[1], 'lifetimeCap', 'monthlyCap', 'revokedAt', 'rpm', 'tpm', 'conc', 'maxCost', 'team')
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
if version then redis.call('HSET', KEYS[1], 'ver', s(version)) end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1
