-- Reconciliation's repair of an account Redis holds at a lower seq than the record has seen (it lost
-- writes the record has): marked unloaded, so the next call loads it from the record (see common.lua).
-- KEYS: 1 account; ARGV: 1 the record's seq
-- Returns {1, seq} when marked, {0, seq} when Redis is not behind (or holds no generation); seq is the
-- account's seq in this Redis.
local a = redis.call('HMGET', KEYS[1], 'gen', 'seq')
if a[1] and num(a[2]) < num(ARGV[1]) then
  redis.call('HDEL', KEYS[1], 'gen')
  return {1, num(a[2])}
end
return {0, num(a[2])}
