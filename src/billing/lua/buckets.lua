-- The buckets a request draws from, as the gateway describes them (src/billing/buckets.ts): a JSON list,
-- one object per declared limit in declaration order, with `reason`, `unit` (money, requests, tokens,
-- concurrent_requests), `kind` and where it is kept:
--   balance    `at` hash, money in `funds`, holds in `held`; a charge draws `funds` down
--   cap        `at` hash, spend in `spent`, holds in `held` (with per = 'month', the UTC month appended)
--   window     `at` hash, the window's number in `window`, the count in `count`; `giveBack`: the
--              settlement returns the unused part of what was counted
--   in_flight  `at` sorted set of request ids scored by their hold's deadline
-- and `limit`: {hash, field} pairs where its limit is read, the first set one in force. Names are relative
-- to the account's hash tag: every bucket lives in the account's slot, whatever the gateway sends.
-- scripts.ts prepends this file (after common.lua) to reserve, settle, settle-batch and reap.

-- The account's key prefix `<ns>:{<accountId>}:`, from the account hash's name.
local function tagPrefix(accountKey)
  return string.sub(accountKey, 1, #accountKey - #'account')
end

-- A bucket's field for a month: monthly spend and holds are kept per UTC month.
local function fieldFor(b, name, month)
  if b.per == 'month' then return name .. month end
  return name
end

-- The limit in force: the first of the bucket's sources (from the `from`th on) that is set (nil: no limit).
local function limitOf(prefix, b, from)
  local sources = b.limit or {}
  for i = from or 1, #sources do
    local v = redis.call('HGET', prefix .. sources[i][1], sources[i][2])
    if v then return tonumber(v) end
  end
  return nil
end

-- What a money bucket has room for now (may be negative), or nil when it has no limit.
local function roomOf(prefix, b, month)
  local at = prefix .. b.at
  if b.kind == 'balance' then
    local v = redis.call('HMGET', at, b.funds, b.held)
    return num(v[1]) - num(v[2])
  end
  if b.kind ~= 'cap' then return nil end
  local limit = limitOf(prefix, b)
  if not limit then return nil end
  local v = redis.call('HMGET', at, fieldFor(b, b.spent, month), fieldFor(b, b.held, month))
  return limit - num(v[1]) - num(v[2])
end

-- Gives `amount` held by a hold of `month` back to every money bucket it drew from.
local function releaseHeld(prefix, buckets, month, amount)
  for _, b in ipairs(buckets) do
    if b.kind == 'balance' then
      redis.call('HINCRBY', prefix .. b.at, b.held, s(-amount))
    elseif b.kind == 'cap' then
      redis.call('HINCRBY', prefix .. b.at, fieldFor(b, b.held, month), s(-amount))
    end
  end
end

-- Charges `amount` into every money bucket: the balance is drawn down, caps count it as spend.
local function chargeInto(prefix, buckets, month, amount)
  for _, b in ipairs(buckets) do
    if b.kind == 'balance' then
      redis.call('HINCRBY', prefix .. b.at, b.funds, s(-amount))
    elseif b.kind == 'cap' then
      redis.call('HINCRBY', prefix .. b.at, fieldFor(b, b.spent, month), s(amount))
    end
  end
end
