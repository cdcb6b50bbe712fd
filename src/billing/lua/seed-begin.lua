-- A reload of one account from the record begins, before it reads the record (account-seed.ts): it
-- takes the account's reload mark. The mark names the reload under way by a token (two gateways
-- reloading at once share it) and collects the record transactions the unloaded account is told of
-- while the read is on its way (catch-up.lua, adjust.lua: a settlement the journal committed, a
-- movement). seed.lua loads the read only while the mark is this one and names no transaction the
-- read's snapshot missed.
-- KEYS: 1 account, 2 reload mark
-- ARGV: 1 a new token (taken when no reload is under way), 2 the mark's life in ms (a reload that never
--       loads leaves nothing behind; one slower than this is read again)
-- Returns '' when the account is loaded already (nothing to read), else the token of the reload.
if redis.call('HEXISTS', KEYS[1], 'gen') == 1 then return '' end
redis.call('HSETNX', KEYS[2], 'token', ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return redis.call('HGET', KEYS[2], 'token')
