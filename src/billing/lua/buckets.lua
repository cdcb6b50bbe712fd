-- The buckets a request draws from, as the gateway describes them (src/billing/buckets.ts, BUCKET_SLOTS):
-- one per declared limit in declaration order, SLOTS strings each, read by position (no JSON to decode:
-- Redis's CPU goes to these scripts). A description is a flat array `d` and the offset `o` of each
-- bucket: its slots are d[o + KIND] .. d[o + DEFAULT_FIELD]. A bucket has its `reason`, `unit` (money,
-- requests, tokens, concurrent_requests), `kind` and where it is kept:
--   balance    `at` hash, money in FIELD1 (funds), holds in FIELD2 (held); a charge draws the funds down
--   cap        `at` hash, spend in FIELD1, holds in FIELD2 (with FLAG 'month', the UTC month appended)
--   window     `at` hash, the window's number in FIELD1, the count in FIELD2; FLAG 'giveBack': the
--              settlement returns the unused part of what was counted
--   in_flight  `at` sorted set of request ids scored by their hold's deadline
-- and where its limit is read: the hash and field of its own (LIMIT_AT, LIMIT_FIELD) and of a default
-- (DEFAULT_AT, DEFAULT_FIELD), the first set one in force, '' for none. Names are relative to the
-- account's hash tag: every bucket lives in the account's slot, whatever the gateway sends.
-- A hold keeps the description as one string, the slots joined by '\n' (bucketsHeld); holds written
-- before kept it as JSON (field `b`), still read here.
-- scripts.ts prepends this file (after common.lua) to reserve, settle, settle-batch and reap.
local SLOTS = 11
local KIND, UNIT, REASON, AT, FIELD1, FIELD2, FLAG, LIMIT_AT, LIMIT_FIELD, DEFAULT_AT, DEFAULT_FIELD = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11

-- The account's key prefix `<ns>:{<accountId>}:`, from the account hash's name.
local function tagPrefix(accountKey)
  return string.sub(accountKey, 1, #accountKey - #'account')
end

-- The description a hold keeps, as a flat array of slots (offset 0). JSON: as holds kept it before.
local function heldSlots(held)
  local d = {}
  if string.sub(held, 1, 1) == '[' then
    for _, b in ipairs(cjson.decode(held)) do
      local own, default = (b.limit or {})[1] or {}, (b.limit or {})[2] or {}
      local flag = ''
      if b.per == 'month' then flag = 'month' elseif b.giveBack then flag = 'giveBack' end
      local slots = {b.kind, b.unit, b.reason, b.at, b.funds or b.spent or b.window or '', b.held or b.count or '',
        flag, own[1] or '', own[2] or '', default[1] or '', default[2] or ''}
      for j = 1, SLOTS do d[#d + 1] = slots[j] end
    end
    return d
  end
  local from = 1
  while true do
    local at = string.find(held, '\n', from, true)
    if not at then
      d[#d + 1] = string.sub(held, from)
      return d
    end
    d[#d + 1] = string.sub(held, from, at - 1)
    from = at + 1
  end
end

-- A bucket's field for a month: monthly spend and holds are kept per UTC month.
local function fieldFor(d, o, slot, month)
  if d[o + FLAG] == 'month' then return d[o + slot] .. month end
  return d[o + slot]
end

-- The limit in force: the first set one of the bucket's sources, its own (from = 1) or its default
-- (from = 2); nil: no limit.
local function limitOf(prefix, d, o, from)
  if (from or 1) == 1 and d[o + LIMIT_AT] ~= '' then
    local v = redis.call('HGET', prefix .. d[o + LIMIT_AT], d[o + LIMIT_FIELD])
    if v then return tonumber(v) end
  end
  if d[o + DEFAULT_AT] ~= '' then
    local v = redis.call('HGET', prefix .. d[o + DEFAULT_AT], d[o + DEFAULT_FIELD])
    if v then return tonumber(v) end
  end
  return nil
end

-- What a money bucket has room for now (may be negative), or nil when it has no limit.
local function roomOf(prefix, d, o, month)
  local kind, at = d[o + KIND], prefix .. d[o + AT]
  if kind == 'balance' then
    local v = redis.call('HMGET', at, d[o + FIELD1], d[o + FIELD2])
    return num(v[1]) - num(v[2])
  end
  if kind ~= 'cap' then return nil end
  local limit = limitOf(prefix, d, o)
  if not limit then return nil end
  local v = redis.call('HMGET', at, fieldFor(d, o, FIELD1, month), fieldFor(d, o, FIELD2, month))
  return limit - num(v[1]) - num(v[2])
end

-- Gives `amount` held by a hold of `month` back to every money bucket of the description (d, from
-- offset `first`, n buckets) it drew from.
local function releaseHeld(prefix, d, first, n, month, amount)
  for o = first, first + (n - 1) * SLOTS, SLOTS do
    local kind = d[o + KIND]
    if kind == 'balance' or kind == 'cap' then
      redis.call('HINCRBY', prefix .. d[o + AT], fieldFor(d, o, FIELD2, month), s(-amount))
    end
  end
end

-- Charges `amount` into every money bucket: the balance is drawn down, caps count it as spend.
local function chargeInto(prefix, d, first, n, month, amount)
  for o = first, first + (n - 1) * SLOTS, SLOTS do
    local kind = d[o + KIND]
    if kind == 'balance' then
      redis.call('HINCRBY', prefix .. d[o + AT], d[o + FIELD1], s(-amount))
    elseif kind == 'cap' then
      redis.call('HINCRBY', prefix .. d[o + AT], fieldFor(d, o, FIELD1, month), s(amount))
    end
  end
end
