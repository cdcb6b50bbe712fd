-- Return expired holds of one account, and remember each so a late settlement is recognised and
-- charged once. The caller listed the due holds and their keys; every key is declared here, so the
-- script stays valid in Redis Cluster (all of them carry the account's hash tag).
-- KEYS: 1 account, 2 holds zset, then per hold i (i = 0..n-1): 3+3i hold, 4+3i key hash, 5+3i reaped marker
-- ARGV: 1 now, 2 marker ttl seconds, then per hold i: 3+2i request id, 4+2i key id
-- Returns {reaped count, earliest remaining deadline or -1, micro-USD released}.
local now = tonumber(ARGV[1])
local count = 0
local released = 0
local i = 0
while KEYS[3 + 3 * i] do
  local holdKey, keyKey, reapedKey = KEYS[3 + 3 * i], KEYS[4 + 3 * i], KEYS[5 + 3 * i]
  local rid, keyId = ARGV[3 + 2 * i], ARGV[4 + 2 * i]
  i = i + 1
  local h = redis.call('HMGET', holdKey, 'amount', 'keyId', 'month', 'deadline')
  -- Re-checked here: the hold may have been settled since the caller listed it.
  if h[1] and h[2] == keyId and tonumber(h[4]) <= now then
    local held = tonumber(h[1])
    redis.call('HINCRBY', KEYS[1], 'held', s(-held))
    redis.call('HINCRBY', keyKey, 'lifetimeHeld', s(-held))
    redis.call('HINCRBY', keyKey, 'mh:' .. h[3], s(-held))
    redis.call('HSET', reapedKey, 'amount', h[1], 'keyId', h[2], 'month', h[3])
    redis.call('EXPIRE', reapedKey, ARGV[2])
    redis.call('DEL', holdKey)
    redis.call('ZREM', KEYS[2], rid)
    count = count + 1
    released = released + held
  elseif not h[1] then
    redis.call('ZREM', KEYS[2], rid)
  end
end
if count > 0 then redis.call('HINCRBY', KEYS[1], 'seq', 1) end
local nextDue = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local nextDeadline = -1
if nextDue[2] then nextDeadline = tonumber(nextDue[2]) end
return {count, nextDeadline, released}
