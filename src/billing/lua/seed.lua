-- Load one account's money from the record into this Redis, once per generation: only when the account
-- has no generation yet (never seeded, wiped, or marked unloaded because it lost writes), so two gateways
-- seeding at once load it once.
-- KEYS: 1 account, 2 usage stream, 3 holds zset, 4 the account's key list, 5 the reload mark
--       (seed-begin.lua), 6.. the hashes whose spend the record gives (one per pair in ARGV): the keys
--       with spend, every team and member
-- ARGV: 1 generation, 2 record snapshot (pg_current_snapshot text), 3 rebuild window (ms),
--       4 balance, 5 credited (less reversals), 6 refunded, 7 charged, 8 month (YYYY-MM), 9 the highest
--       seq the record has seen, 10 the reload mark's token the read was taken under, then per hash of
--       KEYS 6.., in order: lifetime spent, this month's spent
-- Returns 1 when seeded, 0 when the account already had a generation, -1 when the read may miss what
-- the account was told of since it began (read the record again, under a mark taken again).
if redis.call('HEXISTS', KEYS[1], 'gen') == 1 then return 0 end
-- Between the read and now, the unloaded account may have been told of record transactions it could not
-- apply (the journal's catch-up of settlements an earlier copy applied, a movement): each must be in the
-- read's snapshot. A mark that is gone or another (a wipe took it, or a load since, then another reload
-- began) means the account may have been loaded, used and lost meanwhile: the read is too old.
local mark = redis.call('HGETALL', KEYS[5])
local token = nil
for i = 1, #mark, 2 do
  if mark[i] == 'token' then token = mark[i + 1] end
end
if token ~= ARGV[10] then return -1 end
for i = 1, #mark, 2 do
  if string.sub(mark[i], 1, 3) == 'tx:' and not inSnapshot(string.sub(mark[i], 4), ARGV[2]) then return -1 end
end
redis.call('DEL', KEYS[5])
local now = nowMs('')
-- What a partial loss left (an older snapshot, a lagging replica): holds, and spend and holds on the
-- keys, go. The requests of those holds settle as holds of an earlier generation, from their own data;
-- spend is the record's. (A wiped Redis has none of it.) Names are built from the account key's prefix:
-- every one carries the account's hash tag, so they live in this script's slot.
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #'account')
for _, rid in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do redis.call('DEL', prefix .. 'hold:' .. rid) end
redis.call('DEL', KEYS[3])
local function clearSpend(h)
  for _, f in ipairs(redis.call('HKEYS', h)) do
    local p = string.sub(f, 1, 3)
    if p == 'mh:' or p == 'ms:' or f == 'lifetimeHeld' or f == 'lifetimeSpent' then redis.call('HDEL', h, f) end
  end
end
for _, kid in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do clearSpend(prefix .. 'key:' .. kid) end
-- Past any seq a gateway can have been answered with before the loss (writes lost are far fewer), so
-- no gateway takes the new copy for one that is behind.
local seq = math.max(num(redis.call('HGET', KEYS[1], 'seq')), num(ARGV[9])) + 1000000000
-- Usage records still in the stream (a Redis that kept them) are part of the charged figure already.
local inStream = usageCost(redis.call('XRANGE', KEYS[2], '-', '+'))
-- `scopes`: this seed set teams' and members' spend too (reserve.lua loads a copy seeded without it again).
redis.call('HSET', KEYS[1], 'gen', ARGV[1], 'snap', ARGV[2], 'rebuildUntil', s(now + tonumber(ARGV[3])),
  'balance', ARGV[4], 'credited', ARGV[5], 'refunded', ARGV[6], 'usageArchived', s(tonumber(ARGV[7]) - inStream),
  'held', '0', 'seq', s(seq), 'scopes', '1')
for i = 6, #KEYS do
  local at = 11 + (i - 6) * 2
  -- A team's or member's hash is in no list of the account: cleared here, as the keys' are above.
  clearSpend(KEYS[i])
  redis.call('HSET', KEYS[i], 'lifetimeSpent', ARGV[at], 'ms:' .. ARGV[8], ARGV[at + 1])
end
return 1
