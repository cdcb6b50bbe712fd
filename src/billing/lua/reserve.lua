-- Admit or refuse one reservation, atomically over the account balance and the key's two caps.
-- KEYS: 1 account hash, 2 key hash, 3 hold hash, 4 holds zset (all under the account's hash tag),
--       5 the reaper index of the account's slot (a tag of the same slot): the hold and its index entry
--       are written together, so no hold can exist that the reaper does not know of.
-- ARGV: 1 amount, 2 hold life (ms), 3 request id, 4 account id, 5 now (unix ms) or '' for Redis's clock,
--       6 '1' when the account's money comes from the record (it must be seeded first), 7 the highest
--       `seq` of the account this gateway has been answered with (see common.lua)
-- Returns {1, generation, seq} admitted, {0, reason, needed, available, availableOverall} refused,
-- {-1} the account's money is not in this Redis (never seeded, wiped, or behind what the gateway saw),
-- {-2, ms} a seed so fresh that settlements applied before the wipe may still be on their way to the
-- record: try again in ms.
-- All values are integers below 2^53; numbers go back to Redis through %d so they never print as 1e+15.

local amount = tonumber(ARGV[1])
local now = nowMs(ARGV[5])
local deadline = now + tonumber(ARGV[2])
local month = utcMonth(now)

local a = redis.call('HMGET', KEYS[1], 'balance', 'held', 'gen', 'rebuildUntil', 'seq')
if ARGV[6] == '1' then
  if not a[3] then return {-1} end
  if num(a[5]) < num(ARGV[7]) then
    -- Behind what this gateway was answered with: writes were lost. Loaded again from the record.
    redis.call('HDEL', KEYS[1], 'gen')
    return {-1}
  end
  local wait = num(a[4]) - now
  if wait > 0 then return {-2, wait} end
end
local gen = a[3] or ''

-- A retried reserve of a request already held is admitted once.
if redis.call('EXISTS', KEYS[3]) == 1 then return {1, gen, num(a[5])} end

local k = redis.call('HMGET', KEYS[2], 'id', 'revokedAt', 'lifetimeCap', 'monthlyCap',
  'lifetimeSpent', 'lifetimeHeld', 'ms:' .. month, 'mh:' .. month)
if not k[1] then return {0, 'unknown_key', amount, 0, 0} end
if k[2] then return {0, 'key_revoked', amount, 0, 0} end

-- The binding limit is the one with the least left; a refusal names it, so the client is told what
-- actually stops the request. On a tie the earlier wins: balance, then lifetime cap, then monthly cap.
local reason = 'insufficient_balance'
local left = num(a[1]) - num(a[2])
if left < 0 then left = 0 end
if k[3] then
  local lifetimeLeft = num(k[3]) - num(k[5]) - num(k[6])
  if lifetimeLeft < 0 then lifetimeLeft = 0 end
  if lifetimeLeft < left then reason, left = 'key_lifetime_cap_reached', lifetimeLeft end
end
if k[4] then
  local monthLeft = num(k[4]) - num(k[7]) - num(k[8])
  if monthLeft < 0 then monthLeft = 0 end
  if monthLeft < left then reason, left = 'key_monthly_cap_reached', monthLeft end
end

if amount > left then return {0, reason, amount, left, left} end

redis.call('HINCRBY', KEYS[1], 'held', s(amount))
redis.call('HINCRBY', KEYS[2], 'lifetimeHeld', s(amount))
redis.call('HINCRBY', KEYS[2], 'mh:' .. month, s(amount))
redis.call('HSET', KEYS[3], 'amount', s(amount), 'keyId', k[1], 'month', month, 'deadline', s(deadline))
redis.call('ZADD', KEYS[4], s(deadline), ARGV[3])
redis.call('ZADD', KEYS[5], 'LT', s(deadline), ARGV[4])
return {1, gen, redis.call('HINCRBY', KEYS[1], 'seq', 1)}
