-- Credit back what one settled request was charged, once, and append a refund record to the usage stream.
-- The key's spend is left as it was: the key did spend; the refund is a matter of the balance.
-- KEYS: 1 account, 2 settled marker, 3 usage stream; ARGV: 1 request id, 2 now
-- Returns the amount refunded (0 when nothing was charged), -1 when no settled request has this id
-- (or its marker expired), -2 when it was refunded before.
local m = redis.call('HMGET', KEYS[2], 'charged', 'refunded', 'keyId')
if not m[1] then return -1 end
if m[2] then return -2 end
local charged = tonumber(m[1])
redis.call('HSET', KEYS[2], 'refunded', '1')
if charged <= 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'balance', s(charged))
redis.call('HINCRBY', KEYS[1], 'refunded', s(charged))
redis.call('HINCRBY', KEYS[1], 'seq', 1)
redis.call('XADD', KEYS[3], '*', 't', 'r', 'rid', ARGV[1], 'key', m[3], 'cost', s(charged), 'time', ARGV[2])
return charged
