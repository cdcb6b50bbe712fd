-- Helpers every ledger script starts with (scripts.ts prepends this file to each script's source).
-- Integers as Redis strings: never '1e+15' or '12.0'.
local function s(n) return string.format('%d', n) end
-- A hash field as a number; absent or empty is 0.
local function num(v) return tonumber(v) or 0 end
-- The summed cost of the usage records ('t' = 'u') among XRANGE entries; other entries are skipped.
local function usageCost(entries)
  local total = 0
  for _, e in ipairs(entries) do
    local f = e[2]
    local isUsage, c = false, 0
    for i = 1, #f, 2 do
      if f[i] == 't' and f[i + 1] == 'u' then isUsage = true end
      if f[i] == 'cost' then c = num(f[i + 1]) end
    end
    if isUsage then total = total + c end
  end
  return total
end
