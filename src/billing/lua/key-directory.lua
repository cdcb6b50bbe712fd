-- Marks the directory of key hashes complete at the end of a load from the record, only if a load's mark
-- is still there: a wipe during the load removed it (and its pointers), and a directory marked complete
-- over lost pointers would refuse live keys. A mark another gateway's load set since is left for that
-- load to clear (it writes the same pointers); requiring our own token would let two loads that
-- overlap fail each other again and again.
-- KEYS: 1 the load's mark, 2 the complete mark; ARGV: 1 the load's token.
-- Returns 1 when marked complete, 0 when the mark was gone.
local mark = redis.call('GET', KEYS[1])
if not mark then return 0 end
redis.call('SET', KEYS[2], '1')
if mark == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1
