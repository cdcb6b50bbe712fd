-- One consistent view of an account's books: the balance counters, the sum of every usage record
-- (the stream plus what trimming archived) and the number of holds in flight.
-- KEYS: 1 account, 2 usage stream, 3 holds zset
-- Returns {credited, refunded, balance, usageTotal, holdsOutstanding}.
local function num(v) return tonumber(v) or 0 end
local a = redis.call('HMGET', KEYS[1], 'credited', 'refunded', 'balance', 'usageArchived')
local total = num(a[4])
local entries = redis.call('XRANGE', KEYS[2], '-', '+')
for _, e in ipairs(entries) do
  local f = e[2]
  local isUsage, c = false, 0
  for i = 1, #f, 2 do
    if f[i] == 't' and f[i + 1] == 'u' then isUsage = true end
    if f[i] == 'cost' then c = num(f[i + 1]) end
  end
  if isUsage then total = total + c end
end
return {num(a[1]), num(a[2]), num(a[3]), total, redis.call('ZCARD', KEYS[3])}
