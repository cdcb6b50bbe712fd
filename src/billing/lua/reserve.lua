-- Admit or refuse one reservation, atomically over every bucket the request draws from (buckets.lua):
-- the account balance, the budgets of the key's team and of its member, the key's caps, its rate limits.
-- KEYS: 1 account hash, 2 hold hash, 3 holds zset (all under the account's hash tag), 4 the reaper index
--       of the account's slot (a tag of the same slot): the hold and its index entry are written together,
--       so no hold can exist that the reaper does not know of; 5 the key's hash; 6.. every other hash a
--       bucket names (declared for Redis Cluster; all under the account's tag)
-- ARGV: 1 amount, 2 hold life (ms), 3 request id, 4 account id, 5 now (unix ms) or '' for Redis's clock,
--       6 '1' when the account's money comes from the record (it must be seeded first), 7 the highest
--       `seq` of the account this gateway has been answered with (see common.lua), 8 the tokens the
--       request counts against a token limit (its worst case: input bound + output limit), 9 the rate
--       limits' window (ms, 60000 for per-minute limits), 10 the request's buckets as the hold keeps them
--       (names complete, one string: buckets.lua), 11 the key's id, 12 its team's and 13 its owner's ('' for
--       none): the declared buckets on the request's path (DECLARED, buckets.lua) are what it draws from
-- Returns (one decoder reads it: src/billing/script-replies.ts)
--   {1, generation, seq, announce, resetMs, then per bucket: limit (-1: none), used}  admitted, where
--     announce is 1 when this hold made its slot's reaper index non-empty (the gateway then names the slot
--     to the reaper; otherwise it is named already, and the request costs no command beyond this script
--     and its settlement), and each bucket's figures are after this request was counted;
--   {1, generation, seq, 0}  a retried reservation of a request already held (admitted once);
--   {0, reason, needed, available, availableOverall, resetMs, then per bucket: limit, used, then the
--     `name` of the binding bucket's hash (a team's name) and of the account}  refused by the binding
--     limit (needed and available count its unit: micro-USD, requests or tokens);
--   {0, 'unknown_key' | 'key_revoked', amount, 0, 0}  refused before any limit is weighed;
--   {-1}  the account's money is not in this Redis (never seeded, wiped, or behind what the gateway saw);
--   {-2, ms}  a seed so fresh that settlements applied before the wipe may still be on their way to the
--     record: try again in ms.
-- All values are integers below 2^53; numbers go back to Redis through %d so they never print as 1e+15.

local amount = tonumber(ARGV[1])
local now = nowMs(ARGV[5])
local deadline = now + tonumber(ARGV[2])
local month = utcMonth(now)

local a = redis.call('HMGET', KEYS[1], 'gen', 'rebuildUntil', 'seq', 'scopes')
if ARGV[6] == '1' then
  if not a[1] then return {-1} end
  -- Behind what this gateway was answered with (writes were lost), or seeded before the seed counted
  -- teams' and members' spend (`scopes`, seed.lua): loaded again from the record.
  if num(a[3]) < num(ARGV[7]) or not a[4] then
    redis.call('HDEL', KEYS[1], 'gen')
    return {-1}
  end
  local wait = num(a[2]) - now
  if wait > 0 then return {-2, wait} end
end
local gen = a[1] or ''

-- A retried reserve of a request already held is admitted once.
if redis.call('EXISTS', KEYS[2]) == 1 then return {1, gen, num(a[3]), 0} end

local k = redis.call('HMGET', KEYS[5], 'id', 'revokedAt')
if not k[1] then return {0, 'unknown_key', amount, 0, 0} end
if k[2] then return {0, 'key_revoked', amount, 0, 0} end

local prefix = tagPrefix(KEYS[1])
local desc = declared(ARGV[11], ARGV[12], ARGV[13])
local d, nb = desc.d, #desc.at
local windowMs = tonumber(ARGV[9]) or 60000
local win = math.floor(now / windowMs)
local resetMs = (win + 1) * windowMs - now
local need = {money = amount, requests = 1, tokens = num(ARGV[8]), concurrent_requests = 1}

-- A bucket's two hash fields, read with its own limit when that is kept in the same hash (one call).
local function readWith(o, at, f1, f2)
  if d[o + LIMIT_AT] == d[o + AT] and d[o + LIMIT_ID] == d[o + AT_ID] then
    local v = redis.call('HMGET', at, d[o + LIMIT_FIELD], f1, f2)
    return tonumber(v[1]) or limitOf(prefix, desc, o, 2), v[2], v[3]
  end
  local v = redis.call('HMGET', at, f1, f2)
  return limitOf(prefix, desc, o), v[1], v[2]
end

-- Each bucket as it stands: its limit (nil: none) and what is counted against it. Requests and tokens
-- count in fixed windows of Redis's clock (every gateway shares them); requests in flight are a sorted
-- set of request ids scored by hold deadline, so one whose settlement never came drops out when its hold
-- would be reaped. Counts sharing a window field are kept together: all are counted when any is limited.
-- Per bucket i: limits[i] (nil: none), used[i], hashes[i] (the full name, for the draws below too).
local limits, used, hashes, groups = {}, {}, {}, {}
local counted = {}
for i = 1, nb do
  local o = desc.at[i]
  local kind = d[o + KIND]
  local at = nameOf(prefix, desc, o, AT)
  hashes[i] = at
  if kind == 'balance' then
    local v = redis.call('HMGET', at, d[o + FIELD1], d[o + FIELD2])
    limits[i], used[i] = num(v[1]), num(v[2])
  elseif kind == 'cap' then
    local limit, spent, held = readWith(o, at, fieldFor(d, o, FIELD1, month), fieldFor(d, o, FIELD2, month))
    limits[i], used[i] = limit, num(spent) + num(held)
  elseif kind == 'window' then
    local limit, w, n = readWith(o, at, d[o + FIELD1], d[o + FIELD2])
    limits[i], used[i] = limit, 0
    if tonumber(w) == win then used[i] = num(n) end
    groups[i] = at .. '\0' .. d[o + FIELD1]
    if limit then counted[groups[i]] = true end
  elseif kind == 'in_flight' then
    local limit = limitOf(prefix, desc, o)
    limits[i], used[i] = limit, 0
    if limit then
      redis.call('ZREMRANGEBYSCORE', at, '-inf', s(now))
      used[i] = redis.call('ZCARD', at)
    end
  else
    return redis.error_reply('unknown bucket kind ' .. tostring(kind))
  end
  if need[d[o + UNIT]] == nil then return redis.error_reply('unknown bucket unit ' .. tostring(d[o + UNIT])) end
end

local function leftOf(i)
  local l = limits[i] - used[i]
  if l < 0 then l = 0 end
  return l
end
-- Figures of every bucket, for the reply: limit (-1 when none) and what is counted against it.
local function withFigures(r)
  for i = 1, nb do
    r[#r + 1] = limits[i] or -1
    r[#r + 1] = used[i]
  end
  return r
end

-- The rule of src/limits/admission.ts: units in the order their first bucket comes (money first); in a
-- unit the binding limit is the one with the least left (the first on a tie), so a refusal names what
-- actually stops the request; it refuses when the request needs more than that.
local binding, units = {}, {}
for i = 1, nb do
  local unit = d[desc.at[i] + UNIT]
  if not units[unit] then
    units[unit] = true
    units[#units + 1] = unit
  end
  if limits[i] then
    local j = binding[unit]
    if not j or leftOf(i) < leftOf(j) then binding[unit] = i end
  end
end
local overall = 9007199254740991
if binding.money then overall = leftOf(binding.money) end
for _, unit in ipairs(units) do
  local j = binding[unit]
  if j and need[unit] > leftOf(j) then
    local r = withFigures({0, d[desc.at[j] + REASON], need[unit], leftOf(j), overall, resetMs})
    -- What the refusal names: the scope whose limit binds (its hash's `name`) and the account.
    local name = ''
    if d[desc.at[j] + KIND] ~= 'in_flight' then name = redis.call('HGET', hashes[j], 'name') or '' end
    r[#r + 1] = name
    r[#r + 1] = redis.call('HGET', KEYS[1], 'name') or ''
    return r
  end
end

-- Admitted: the request draws from every bucket.
local remembered = {'amount', s(amount), 'keyId', k[1], 'month', month, 'deadline', s(deadline), 'd', ARGV[10]}
for i = 1, nb do
  local o = desc.at[i]
  local kind, at = d[o + KIND], hashes[i]
  if kind == 'balance' or kind == 'cap' then
    redis.call('HINCRBY', at, fieldFor(d, o, FIELD2, month), s(amount))
    used[i] = used[i] + amount
  elseif kind == 'window' then
    if counted[groups[i]] then
      local n = need[d[o + UNIT]]
      used[i] = used[i] + n
      redis.call('HSET', at, d[o + FIELD1], s(win), d[o + FIELD2], s(used[i]))
      -- What the window counted, so the settlement gives back the unused part in the same window.
      if d[o + FLAG] == 'giveBack' and limits[i] then
        remembered[#remembered + 1] = 'win:' .. i
        remembered[#remembered + 1] = s(win)
        remembered[#remembered + 1] = 'cnt:' .. i
        remembered[#remembered + 1] = s(n)
      end
    end
  elseif kind == 'in_flight' and limits[i] then
    redis.call('ZADD', at, s(deadline), ARGV[3])
    used[i] = used[i] + 1
    -- Gone by itself once its last hold's deadline passes, as the holds are (relative to `now`, which
    -- tests may set: an absolute time would be read against Redis's own clock).
    local last = redis.call('ZRANGE', at, -1, -1, 'WITHSCORES')
    redis.call('PEXPIRE', at, s(math.max(1, tonumber(last[2]) - now)))
  end
end

-- The hold remembers its buckets (as described, with its month), so the settlement and the reaper
-- release exactly what it took.
redis.call('HSET', KEYS[2], unpack(remembered))
redis.call('ZADD', KEYS[3], s(deadline), ARGV[3])
local announce = 0
if redis.call('ZCARD', KEYS[4]) == 0 then announce = 1 end
redis.call('ZADD', KEYS[4], 'LT', s(deadline), ARGV[4])
return withFigures({1, gen, redis.call('HINCRBY', KEYS[1], 'seq', 1), announce, resetMs})
