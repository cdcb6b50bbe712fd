-- Load one account's money from the record into this Redis, once per generation: only when the account
-- has no generation yet (never seeded, or wiped), so two gateways seeding at once load it once.
-- KEYS: 1 account, 2 usage stream, 3.. the account's key hashes (one per key in ARGV)
-- ARGV: 1 generation, 2 record snapshot (pg_current_snapshot text), 3 rebuild window (ms),
--       4 balance, 5 credited (less reversals), 6 refunded, 7 charged, 8 month (YYYY-MM),
--       then per key, in KEYS order: lifetime spent, this month's spent
-- Returns 1 when seeded, 0 when the account already had a generation.
if redis.call('HEXISTS', KEYS[1], 'gen') == 1 then return 0 end
local now = nowMs('')
-- Usage records still in the stream (a Redis that kept them) are part of the charged figure already.
local inStream = usageCost(redis.call('XRANGE', KEYS[2], '-', '+'))
redis.call('HSET', KEYS[1], 'gen', ARGV[1], 'snap', ARGV[2], 'rebuildUntil', s(now + tonumber(ARGV[3])),
  'balance', ARGV[4], 'credited', ARGV[5], 'refunded', ARGV[6], 'usageArchived', s(tonumber(ARGV[7]) - inStream))
for i = 3, #KEYS do
  local at = 9 + (i - 3) * 2
  redis.call('HSET', KEYS[i], 'lifetimeSpent', ARGV[at], 'ms:' .. ARGV[8], ARGV[at + 1])
end
return 1
