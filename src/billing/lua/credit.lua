-- Add a top-up once per idempotency key.
-- KEYS: 1 account, 2 credit marker; ARGV: 1 amount, 2 now
-- Returns 1 when credited, 0 for a repeated idempotency key with the same amount, -1 for an unknown
-- account, -2 when the balance would pass 2^53 - 1 (the largest integer every reader of it holds
-- exactly), -3 when the idempotency key was already used for a different amount (a client bug or a
-- replayed key: applying neither silently is the only safe answer).
if redis.call('HEXISTS', KEYS[1], 'id') == 0 then return -1 end
local previous = redis.call('GET', KEYS[2])
if previous then
  local amount = string.match(previous, '^(%d+)')
  if amount ~= nil and amount ~= s(tonumber(ARGV[1])) then return -3 end
  return 0
end
local balance = tonumber(redis.call('HGET', KEYS[1], 'balance')) or 0
if balance + tonumber(ARGV[1]) > 9007199254740991 then return -2 end
redis.call('SET', KEYS[2], s(tonumber(ARGV[1])) .. ':' .. ARGV[2])
redis.call('HINCRBY', KEYS[1], 'balance', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'credited', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'seq', 1)
return 1
