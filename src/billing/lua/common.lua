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
-- Unix ms: the override when the caller gave one (tests crossing a month), else Redis's own clock, so
-- hold deadlines and billing months never depend on a gateway pod's clock.
local function nowMs(override)
  if override and override ~= '' then return tonumber(override) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- The calendar month (UTC) of unix ms, as YYYY-MM (civil-from-days, proleptic Gregorian).
local function utcMonth(ms)
  local z = math.floor(ms / 86400000) + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d', y, m)
end
-- The hot path as a cache of the record (PostgreSQL): an account's money is loaded into Redis by the
-- seed script, which stamps the hash with a generation and the record's snapshot at the time of the
-- load. A wiped Redis has no generation: the gateway loads the account again before using it.
-- Every script that changes an account's money or holds adds 1 to the account's `seq`. A gateway keeps
-- the highest `seq` it was answered with, per account, and passes it to the next reserve and settle: a
-- Redis whose `seq` is lower lost writes it had acknowledged (restarted from an older AOF or RDB, a
-- failover to a lagging replica) while keeping the generation. Such an account is marked unloaded (its
-- `gen` deleted), so the gateway loads it again from the record, as after a wipe.
-- Whether a record transaction (an xid8 as text) is in a snapshot 'xmin:xmax:xip,xip,...' (the text of
-- pg_current_snapshot()): committed before it was taken, so what it wrote is in the seeded figures.
local function inSnapshot(xid, snap)
  if not xid or xid == '' or not snap or snap == '' then return false end
  local xmin, xmax, xip = string.match(snap, '^(%d+):(%d+):(.*)$')
  local x = tonumber(xid)
  if not xmin or not x then return false end
  if x < tonumber(xmin) then return true end
  if x >= tonumber(xmax) then return false end
  for v in string.gmatch(xip, '%d+') do
    if tonumber(v) == x then return false end
  end
  return true
end
-- An account not loaded is told of a record transaction it cannot apply (a settlement the journal
-- committed, a movement): a reload under way (its mark, seed-begin.lua) must have read it, or it reads
-- again. Without a reload under way there is nothing to note: the next one reads after this commit.
local function tellReload(mark, xid)
  if xid and xid ~= '' and redis.call('EXISTS', mark) == 1 then redis.call('HSET', mark, 'tx:' .. xid, '1') end
end
