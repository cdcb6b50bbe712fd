-- Group commit: several settlements of one cluster slot in one script call, each exactly as settle.lua
-- runs it alone (scripts.ts wraps settle.lua's body as settle_one(KEYS, ARGV) above this).
-- KEYS: every settlement's keys, one after another.
-- ARGV: 1 the number of settlements; then for each: its key count, its argument count, its arguments.
-- Returns one reply per settlement, in order: what settle.lua returns for it.
local out = {}
local k, a = 1, 2
for i = 1, tonumber(ARGV[1]) do
  local nk, na = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  local keys, args = {}, {}
  for j = 1, nk do keys[j] = KEYS[k + j - 1] end
  for j = 1, na do args[j] = ARGV[a + 1 + j] end
  k = k + nk
  a = a + 2 + na
  out[i] = settle_one(keys, args)
end
return out
