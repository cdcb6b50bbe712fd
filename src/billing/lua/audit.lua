-- One consistent view of an account's books: the balance counters, the sum of every usage record
-- (the stream plus what trimming archived) and the number of holds in flight.
-- KEYS: 1 account, 2 usage stream, 3 holds zset
-- Returns {credited, refunded, balance, usageTotal, holdsOutstanding}.
local a = redis.call('HMGET', KEYS[1], 'credited', 'refunded', 'balance', 'usageArchived')
local total = num(a[4]) + usageCost(redis.call('XRANGE', KEYS[2], '-', '+'))
return {num(a[1]), num(a[2]), num(a[3]), total, redis.call('ZCARD', KEYS[3])}
