-- Settle one request exactly once: charge min(cost, held) into every money bucket the hold drew from
-- (buckets.lua: the balance, the budgets of its team and member, the key's caps), release the rest,
-- give back what the token window counted beyond the use, free its
-- place in flight, append the usage record.
-- KEYS: 1 account, 2 hold, 3 holds zset, 4 settled marker, 5 reaped marker, 6 usage stream, 7 journal
--       stream (when journaled: what PostgreSQL has yet to commit; the writer deletes an entry after
--       COMMIT), 8.. every hash the buckets name (declared for Redis Cluster; all under the account's tag)
-- ARGV: 1 cost, 2 request id, 3 key id, 4 model, 5 input, 6 output, 7 cachedInput, 8 reasoning,
--       9 status, 10 latencyMs, 11 now, 12 marker ttl seconds, 13 usage max records, 14 trim threshold,
--       15 '1' when the account's money comes from the record, 16 the generation the hold was reserved in,
--       17 the amount it reserved, 18 '1' when a journal writer takes the settlements to the record,
--       19 the highest `seq` of the account this gateway has been answered with (see common.lua),
--       20 the request's detail for the usage record (request-detail.ts), when journaled,
--       21 the tokens the request used against a token limit (input + output),
--       22 input tokens written to a 5-minute prompt cache, 23 to a 1-hour one (both parts of `input`,
--       apart from `cachedInput`, the cache reads), 24 the request's buckets as the gateway describes
--       them now, as a hold keeps them (names complete, one string: buckets.lua), 25 the team and 26 the
--       member the request is charged to ('' for none), for the journal entry and the declared buckets on
--       its path (DECLARED, buckets.lua): what a hold that kept the same drew from, and one without its
--       own description, or lost with a wipe
-- One decoder reads the reply: src/billing/script-replies.ts.
-- Returns {charged, released, duplicate (0/1), late (0/1)}, when journaled (ARGV 18) followed by the
-- journal entry id, month, reserved, generation and the account's new seq;
-- or {-1} when the account's money is not in this Redis (wiped, or it lost writes: behind the seq the
-- gateway saw, or without a hold the gateway took in this generation): the gateway loads it again from
-- the record and settles again.

local cost = tonumber(ARGV[1])
if redis.call('EXISTS', KEYS[4]) == 1 then return {0, 0, 1, 0} end
local gen = ''
if ARGV[15] == '1' then
  local g = redis.call('HMGET', KEYS[1], 'gen', 'seq')
  gen = g[1]
  if not gen then return {-1} end
  if num(g[2]) < num(ARGV[19]) then
    redis.call('HDEL', KEYS[1], 'gen')
    return {-1}
  end
end

local charge, released, late, month, reserved
local prefix = tagPrefix(KEYS[1])
-- The buckets a hold or reaped marker kept (false: none): the declared ones on the request's path (as
-- the gateway describes them now) when it kept the same, as nearly always, or none; else its own copy.
local function keptOr(held)
  if not held or held == ARGV[24] then return declared(ARGV[3], ARGV[25] or '', ARGV[26] or '') end
  return kept(held)
end
-- The request is no longer in flight, whatever became of its hold.
local function leaveFlight(desc)
  for _, o in ipairs(desc.at) do
    if desc.d[o + KIND] == 'in_flight' then redis.call('ZREM', nameOf(prefix, desc, o, AT), ARGV[2]) end
  end
end
local h = redis.call('HMGET', KEYS[2], 'amount', 'keyId', 'month', 'd', 'b')
if h[1] then
  if h[2] ~= ARGV[3] then return redis.error_reply('hold belongs to another key') end
  -- The buckets the hold drew from, as it remembers them.
  local desc = keptOr(h[4] or h[5])
  local d = desc.d
  leaveFlight(desc)
  local held = num(h[1])
  reserved = held
  month = h[3]
  charge = cost
  if charge > held then charge = held end
  released = held - charge
  late = 0
  releaseHeld(prefix, desc, month, held)
  chargeInto(prefix, desc, month, charge)
  for i, o in ipairs(desc.at) do
    if d[o + KIND] == 'window' and d[o + FLAG] == 'giveBack' then
      local at = nameOf(prefix, desc, o, AT)
      -- The window counted the worst case: what the request did not use goes back, if the window is
      -- still the one it was counted in.
      local w = redis.call('HMGET', KEYS[2], 'win:' .. i, 'cnt:' .. i)
      if w[1] then
        local unused = num(w[2]) - num(ARGV[21])
        if unused > 0 and redis.call('HGET', at, d[o + FIELD1]) == w[1] then
          local left = num(redis.call('HGET', at, d[o + FIELD2])) - unused
          if left < 0 then left = 0 end
          redis.call('HSET', at, d[o + FIELD2], s(left))
        end
      end
    end
  end
  redis.call('DEL', KEYS[2])
  redis.call('ZREM', KEYS[3], ARGV[2])
else
  -- No hold (reaped, lost with a wipe, or never taken): the key's places in flight as described now.
  leaveFlight(keptOr(false))
  local r = redis.call('HMGET', KEYS[5], 'amount', 'keyId', 'month', 'd', 'b')
  if not r[1] then
    -- Reserved in an earlier generation of this Redis (wiped and seeded again since): the hold was lost
    -- with the wipe, the seed did not count it, and the work was done. Charged as a late settlement.
    if gen ~= '' and ARGV[16] ~= '' and ARGV[16] ~= gen then
      r = {ARGV[17], ARGV[3], utcMonth(nowMs(''))}
    elseif gen ~= '' and ARGV[16] ~= '' then
      -- This generation took the hold, the gateway never saw it settled, and it is neither held, settled
      -- nor reaped: Redis lost writes it had acknowledged (an older AOF or RDB, a lagging replica). Not a
      -- duplicate: the account is loaded again from the record and the settlement is charged from its
      -- own data as a hold of an earlier generation.
      redis.call('HDEL', KEYS[1], 'gen')
      return {-1}
    else
      -- Neither held nor reaped: settled so long ago that its marker expired (or never reserved).
      return {0, 0, 1, 0}
    end
  end
  if r[2] ~= ARGV[3] then return redis.error_reply('reaped hold belongs to another key') end
  local desc = keptOr(r[4] or r[5])
  month = r[3]
  reserved = num(r[1])
  late = 1
  released = 0
  -- The hold is gone, so other requests may have used its room: take only what every money bucket
  -- still has.
  charge = cost
  if num(r[1]) < charge then charge = num(r[1]) end
  for _, o in ipairs(desc.at) do
    local room = roomOf(prefix, desc, o, month)
    if room and room < charge then charge = room end
  end
  if charge < 0 then charge = 0 end
  chargeInto(prefix, desc, month, charge)
  redis.call('DEL', KEYS[5])
end

local seq = redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('HSET', KEYS[4], 'charged', s(charge), 'keyId', ARGV[3])
redis.call('EXPIRE', KEYS[4], ARGV[12])
if ARGV[18] == '1' then
  -- Journaled, usage history lives in PostgreSQL: the journal stream is this Redis's only copy of the
  -- settlement, held until PostgreSQL commits it, and the books count the charge as archived at once. A
  -- second copy in the usage stream would double the append and hold a history nobody reads here.
  redis.call('HINCRBY', KEYS[1], 'usageArchived', s(charge))
  -- Appended in this same script, so a settlement Redis applied is never without its entry.
  local jid = redis.call('XADD', KEYS[7], '*', 'rid', ARGV[2], 'key', ARGV[3], 'model', ARGV[4],
    'in', ARGV[5], 'out', ARGV[6], 'cin', ARGV[7], 'rsn', ARGV[8], 'cost', s(charge), 'res', s(reserved),
    'st', ARGV[9], 'lat', ARGV[10], 'time', ARGV[11], 'month', month, 'gen', gen, 'seq', s(seq), 'd', ARGV[20] or '',
    'cw5', ARGV[22] or '0', 'cw1', ARGV[23] or '0', 'team', ARGV[25] or '', 'member', ARGV[26] or '')
  return {charge, released, 0, late, jid, month, reserved, gen, seq}
end

-- Not journaled (no record): the usage stream is the history; a journal stream would never be read or
-- trimmed.
redis.call('XADD', KEYS[6], '*', 't', 'u', 'rid', ARGV[2], 'key', ARGV[3], 'model', ARGV[4],
  'in', ARGV[5], 'out', ARGV[6], 'cin', ARGV[7], 'rsn', ARGV[8], 'cost', s(charge),
  'st', ARGV[9], 'lat', ARGV[10], 'time', ARGV[11], 'cw5', ARGV[22] or '0', 'cw1', ARGV[23] or '0')
-- Keep the stream bounded without losing the books: the cost of what is trimmed moves to a counter.
local len = redis.call('XLEN', KEYS[6])
if len > tonumber(ARGV[14]) then
  local excess = len - tonumber(ARGV[13])
  local archived = usageCost(redis.call('XRANGE', KEYS[6], '-', '+', 'COUNT', s(excess)))
  -- Exact trim: removes precisely the entries just summed (the oldest `excess`).
  redis.call('XTRIM', KEYS[6], 'MAXLEN', ARGV[13])
  redis.call('HINCRBY', KEYS[1], 'usageArchived', s(archived))
end
return {charge, released, 0, late}
