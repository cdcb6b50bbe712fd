-- Apply a movement of money the record (PostgreSQL) committed first: a signed amount (a top-up, a
-- credit, a refund > 0; a reversal < 0), once per idempotency key. The marker shares the credit
-- markers' keys, so a movement is never applied once as a credit and again as a movement.
-- KEYS: 1 account, 2 movement marker, 3 the account's reload mark (seed-begin.lua)
-- ARGV: 1 signed amount, 2 the account field it also moves ('credited' or 'refunded', so the audit
--       stays balanced), 3 now, 4 the record's transaction of the commit (xid8 text), 5 '1' when the
--       account's money is loaded from the record (seeded), 6 the highest seq of the account the
--       gateway was answered with (a copy behind it lost writes: marked unloaded, see common.lua)
-- Returns {1, seq} when applied (seq: the account's new seq, see common.lua), {0} when applied before or
-- counted by the account's seed already, {-1} for an unknown account, {-2} when the balance would leave
-- +-(2^53 - 1), {-3} when the marker holds another amount, {-4} when the account is not loaded (its seed
-- will count the movement: a load under way is told of it, so that it reads again if its read missed it).
local seeded = nil
if ARGV[5] == '1' then
  seeded = redis.call('HMGET', KEYS[1], 'gen', 'snap', 'seq')
  if not seeded[1] then
    tellReload(KEYS[3], ARGV[4])
    return {-4}
  end
  if num(seeded[3]) < num(ARGV[6]) then
    redis.call('HDEL', KEYS[1], 'gen')
    return {-4}
  end
elseif redis.call('HEXISTS', KEYS[1], 'id') == 0 then return {-1} end
local amount = tonumber(ARGV[1])
local previous = redis.call('GET', KEYS[2])
if previous then
  local was = string.match(previous, '^(-?%d+)')
  if was ~= nil and was ~= s(amount) then return {-3} end
  return {0}
end
-- Committed before the seed read the record: the seeded figures have it already.
if seeded and inSnapshot(ARGV[4], seeded[2]) then
  redis.call('SET', KEYS[2], s(amount) .. ':' .. ARGV[3])
  return {0}
end
local balance = num(redis.call('HGET', KEYS[1], 'balance')) + amount
if balance > 9007199254740991 or balance < -9007199254740991 then return {-2} end
redis.call('SET', KEYS[2], s(amount) .. ':' .. ARGV[3])
redis.call('HINCRBY', KEYS[1], 'balance', s(amount))
redis.call('HINCRBY', KEYS[1], ARGV[2], s(amount))
return {1, redis.call('HINCRBY', KEYS[1], 'seq', 1)}
