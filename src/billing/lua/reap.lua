-- Return expired holds of one account to every money bucket they drew from (buckets.lua), and remember
-- each so a late settlement is recognised and charged once. The caller listed the due holds; every key is
-- declared here, so the script stays valid in Redis Cluster (all of them carry the account's hash tag).
-- KEYS: 1 account, 2 holds zset, then per hold i (i = 0..n-1): 3+2i hold, 4+2i reaped marker; then every
--       hash the holds' buckets name
-- ARGV: 1 now, 2 marker ttl seconds, 3 the number of holds n, then per hold i: 4+3i request id, 5+3i key
--       id, 6+3i the key's buckets as the gateway describes them, as a hold keeps them (names complete,
--       buckets.lua): what a hold that does not remember its own drew from
-- Returns {reaped count, earliest remaining deadline or -1, micro-USD released}.
local now = tonumber(ARGV[1])
local prefix = tagPrefix(KEYS[1])
local count = 0
local released = 0
for i = 0, tonumber(ARGV[3]) - 1 do
  local holdKey, reapedKey = KEYS[3 + 2 * i], KEYS[4 + 2 * i]
  local rid, keyId, described = ARGV[4 + 3 * i], ARGV[5 + 3 * i], ARGV[6 + 3 * i]
  local h = redis.call('HMGET', holdKey, 'amount', 'keyId', 'month', 'deadline', 'd', 'b')
  -- Re-checked here: the hold may have been settled since the caller listed it.
  if h[1] and h[2] == keyId and tonumber(h[4]) <= now then
    local held = tonumber(h[1])
    local buckets = h[5] or h[6] or described
    releaseHeld(prefix, kept(buckets), h[3], held)
    redis.call('HSET', reapedKey, 'amount', h[1], 'keyId', h[2], 'month', h[3], 'd', buckets)
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
