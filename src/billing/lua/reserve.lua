-- Admit or refuse one reservation, atomically over the account balance and the key's two caps.
-- KEYS: 1 account hash, 2 key hash, 3 hold hash, 4 holds zset (all under the account's hash tag),
--       5 the reaper index of the account's slot (a tag of the same slot): the hold and its index entry
--       are written together, so no hold can exist that the reaper does not know of.
--       6 the key's requests in flight (zset of request ids by hold deadline, same tag): its rate limits
-- ARGV: 1 amount, 2 hold life (ms), 3 request id, 4 account id, 5 now (unix ms) or '' for Redis's clock,
--       6 '1' when the account's money comes from the record (it must be seeded first), 7 the highest
--       `seq` of the account this gateway has been answered with (see common.lua), 8 the tokens the
--       request counts against a token limit (its worst case: input bound + output limit), 9 the rate
--       limits' window (ms, 60000 for per-minute limits)
-- Returns {1, generation, seq, announce, rate...} admitted, where announce is 1 when this hold made its
-- slot's reaper index non-empty (the gateway then names the slot to the reaper; otherwise it is named
-- already, and the request costs no command beyond this script and its settlement), {0, reason, needed, available, availableOverall, rate...}
-- refused, where rate is the key's rate-limit state after the decision (see rateState below); a refusal
-- by a rate limit has reason 'rate_limit_requests', 'rate_limit_tokens' or 'rate_limit_concurrency'
-- (needed and available then count requests or tokens, not money);
-- {-1} the account's money is not in this Redis (never seeded, wiped, or behind what the gateway saw),
-- {-2, ms} a seed so fresh that settlements applied before the wipe may still be on their way to the
-- record: try again in ms.
-- All values are integers below 2^53; numbers go back to Redis through %d so they never print as 1e+15.

local amount = tonumber(ARGV[1])
local now = nowMs(ARGV[5])
local deadline = now + tonumber(ARGV[2])
local month = utcMonth(now)

local a = redis.call('HMGET', KEYS[1], 'balance', 'held', 'gen', 'rebuildUntil', 'seq', 'drpm', 'dtpm', 'dconc')
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
if redis.call('EXISTS', KEYS[3]) == 1 then return {1, gen, num(a[5]), 0} end

local k = redis.call('HMGET', KEYS[2], 'id', 'revokedAt', 'lifetimeCap', 'monthlyCap',
  'lifetimeSpent', 'lifetimeHeld', 'ms:' .. month, 'mh:' .. month, 'rpm', 'tpm', 'conc', 'rlWin', 'rlReq', 'rlTok')
if not k[1] then return {0, 'unknown_key', amount, 0, 0} end
if k[2] then return {0, 'key_revoked', amount, 0, 0} end

-- Rate limits: the key's own, else the account's default for keys. Requests and tokens count in fixed
-- windows of Redis's clock (every gateway shares them); requests in flight are the key's zset of request
-- ids scored by hold deadline, so one whose settlement never came drops out when its hold would be reaped.
local rpm, tpm, conc = tonumber(k[9] or a[6]), tonumber(k[10] or a[7]), tonumber(k[11] or a[8])
local tokens = num(ARGV[8])
local windowMs = tonumber(ARGV[9]) or 60000
local win = math.floor(now / windowMs)
local reqs, toks = 0, 0
if tonumber(k[12]) == win then reqs, toks = num(k[13]), num(k[14]) end
local inflight = 0
if conc then
  redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', s(now))
  inflight = redis.call('ZCARD', KEYS[6])
end
local resetMs = (win + 1) * windowMs - now
-- {rpm, requests left, tpm, tokens left, ms to the window's end, concurrency, in flight}; -1 = no limit.
local function rateState()
  local rl, tl = -1, -1
  if rpm then rl = math.max(0, rpm - reqs) end
  if tpm then tl = math.max(0, tpm - toks) end
  return {rpm or -1, rl, tpm or -1, tl, resetMs, conc or -1, inflight}
end
local function refused(reason, needed, available, overall)
  local r = {0, reason, needed, available, overall}
  for _, v in ipairs(rateState()) do r[#r + 1] = v end
  return r
end

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

if amount > left then return refused(reason, amount, left, left) end

if rpm and reqs + 1 > rpm then return refused('rate_limit_requests', 1, math.max(0, rpm - reqs), left) end
if tpm and toks + tokens > tpm then return refused('rate_limit_tokens', tokens, math.max(0, tpm - toks), left) end
if conc and inflight + 1 > conc then return refused('rate_limit_concurrency', 1, math.max(0, conc - inflight), left) end

if rpm or tpm then
  reqs, toks = reqs + 1, toks + tokens
  redis.call('HSET', KEYS[2], 'rlWin', s(win), 'rlReq', s(reqs), 'rlTok', s(toks))
end
if conc then
  redis.call('ZADD', KEYS[6], s(deadline), ARGV[3])
  inflight = inflight + 1
  -- Gone by itself once its last hold's deadline passes, as the holds are (relative to `now`, which
  -- tests may set: an absolute time would be read against Redis's own clock).
  local last = redis.call('ZRANGE', KEYS[6], -1, -1, 'WITHSCORES')
  redis.call('PEXPIRE', KEYS[6], s(math.max(1, tonumber(last[2]) - now)))
end

redis.call('HINCRBY', KEYS[1], 'held', s(amount))
redis.call('HINCRBY', KEYS[2], 'lifetimeHeld', s(amount))
redis.call('HINCRBY', KEYS[2], 'mh:' .. month, s(amount))
redis.call('HSET', KEYS[3], 'amount', s(amount), 'keyId', k[1], 'month', month, 'deadline', s(deadline))
-- What the token window counted, so the settlement gives back the unused part in the same window.
if tpm then redis.call('HSET', KEYS[3], 'rlWin', s(win), 'rlTok', s(tokens)) end
redis.call('ZADD', KEYS[4], s(deadline), ARGV[3])
local announce = 0
if redis.call('ZCARD', KEYS[5]) == 0 then announce = 1 end
redis.call('ZADD', KEYS[5], 'LT', s(deadline), ARGV[4])
local r = {1, gen, redis.call('HINCRBY', KEYS[1], 'seq', 1), announce}
for _, v in ipairs(rateState()) do r[#r + 1] = v end
return r
