-- Writes a team's or a member's budgets (and a team's name) as the record (PostgreSQL) has them at
-- `version`, unless the hot path already holds a newer version: copies pushed out of order never bring
-- older budgets back. Its spend and holds, kept in the same hash, are left as they are.
-- KEYS: 1 the scope's hash (`team:<id>` or `member:<userId>` under the account's tag)
-- ARGV: 1 version ('' writes whatever is there), then field, value pairs of what is set (name,
--       lifetimeBudget, monthlyBudget)
-- Returns 1 when written, 0 when a newer version was there already.
local version = tonumber(ARGV[1])
if version then
  local current = tonumber(redis.call('HGET', KEYS[1], 'ver'))
  if current and current > version then return 0 end
end
redis.call('HDEL', KEYS[1], 'name', 'lifetimeBudget', 'monthlyBudget')
if #ARGV > 1 then redis.call('HSET', KEYS[1], unpack(ARGV, 2)) end
if version then redis.call('HSET', KEYS[1], 'ver', s(version)) end
return 1
