-- Writes an account's identity and its default rate limits for keys as the record (PostgreSQL) has
-- them at `version`, unless the hot path already holds newer limits: copies pushed out of order never
-- bring older limits back. The account's money is left as it is.
-- KEYS: 1 account hash; ARGV: 1 version ('' writes whatever is there), 2 id, 3 name, 4 created at (ms),
--       then field, value pairs of the default limits set (drpm, dtpm, dconc)
-- Returns 1 when the limits were written, 0 when a newer version was there (the identity is written anyway).
redis.call('HSET', KEYS[1], 'id', ARGV[2], 'name', ARGV[3], 'createdAt', ARGV[4])
local version = tonumber(ARGV[1])
if version then
  local current = tonumber(redis.call('HGET', KEYS[1], 'limitsVer'))
  if current and current > version then return 0 end
end
redis.call('HDEL', KEYS[1], 'drpm', 'dtpm', 'dconc')
if #ARGV > 4 then redis.call('HSET', KEYS[1], unpack(ARGV, 5)) end
if version then redis.call('HSET', KEYS[1], 'limitsVer', s(version)) end
return 1
