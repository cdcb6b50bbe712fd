-- The journal's last step for settlements the record has committed: their Redis copies are deleted
-- and, where a settlement was applied by an earlier generation of this Redis (wiped since) and the seed
-- did not count it (its commit is not in the seed's snapshot), it is applied to this generation now,
-- once. In the normal case (same generation) this is the XDEL it replaces.
-- An account not loaded (wiped, or marked unloaded) has no figures to apply them to: the next load reads
-- the record, which has them. A load may be under way, though, its read of the record taken before their
-- commit: they are told to its mark (tellReload), so that it reads again.
-- KEYS: 1 account, 2 journal stream, 3 the account's reload mark (seed-begin.lua), 4.. the hashes whose
--       spend the entries below count (their keys, teams and members)
-- ARGV: 1 number of stream ids N, 2..(N+1) stream ids, N+2 the highest seq the entries were applied
--       at (see common.lua), then either
--       'gens' and the generations the charged entries were applied in (the common, short form), or
--       per charged entry: generation, request id, the indexes into KEYS of its spend's hashes (its key's,
--       then its team's and member's, comma-separated), month, charged, record transaction of its commit
--       (xid8 text)
-- Returns the amount applied to this generation, or -1 (nothing done) when the short form names a
-- generation other than this Redis's, or names one while the account is not loaded and a load is under
-- way: the caller sends the entries themselves.
local n = tonumber(ARGV[1])
-- Deletes the N stream ids, in slices: unpack has a stack limit.
local function deleteCopies()
  for i = 2, n + 1, 1000 do
    local last = i + 999
    if last > n + 1 then last = n + 1 end
    redis.call('XDEL', KEYS[2], unpack(ARGV, i, last))
  end
end
local first = n + 3
if ARGV[first] == 'gens' then
  local current = redis.call('HMGET', KEYS[1], 'gen', 'seq')
  if current[1] then
    for i = first + 1, #ARGV do
      if ARGV[i] ~= '' and ARGV[i] ~= current[1] then return -1 end
    end
    -- Applied in this generation at a seq this Redis no longer reaches: it lost them (and perhaps more).
    -- Marked unloaded: the next call loads the account from the record, which has them now.
    if num(current[2]) < num(ARGV[n + 2]) then redis.call('HDEL', KEYS[1], 'gen') end
  elseif #ARGV > first and redis.call('EXISTS', KEYS[3]) == 1 then
    -- Charges, an account not loaded, a load under way: the load must learn their commits.
    return -1
  end
  deleteCopies()
  return 0
end
deleteCopies()
local a = redis.call('HMGET', KEYS[1], 'gen', 'snap')
if not a[1] then
  for i = first, #ARGV, 6 do tellReload(KEYS[3], ARGV[i + 5]) end
  return 0
end
local applied = 0
for i = first, #ARGV, 6 do
  local gen, rid, hashes, month, charged, xid = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4]), ARGV[i + 5]
  if gen ~= '' and gen ~= a[1] and charged > 0 and not inSnapshot(xid, a[2]) then
    local marker = KEYS[1] .. ':caught-up:' .. rid
    if redis.call('SET', marker, '1', 'NX', 'EX', 2592000) then
      redis.call('HINCRBY', KEYS[1], 'balance', s(-charged))
      redis.call('HINCRBY', KEYS[1], 'usageArchived', s(charged))
      for at in string.gmatch(hashes, '%d+') do
        redis.call('HINCRBY', KEYS[tonumber(at)], 'lifetimeSpent', s(charged))
        redis.call('HINCRBY', KEYS[tonumber(at)], 'ms:' .. month, s(charged))
      end
      applied = applied + charged
    end
  end
end
if applied > 0 then redis.call('HINCRBY', KEYS[1], 'seq', 1) end
return applied
