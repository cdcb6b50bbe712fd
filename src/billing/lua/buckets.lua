-- The buckets a request draws from (src/billing/buckets.ts, BUCKET_SLOTS): one per declared limit in
-- declaration order, SLOTS strings each, read by position (no JSON to decode: Redis's CPU goes to these
-- scripts). Slots are read as d[o + KIND] .. d[o + DEFAULT_FIELD], `o` the bucket's offset in the flat
-- array `d`. A bucket has its `reason`, `unit` (money, requests, tokens, concurrent_requests), `kind`
-- and where it is kept:
--   balance    `at` hash, money in FIELD1 (funds), holds in FIELD2 (held); a charge draws the funds down
--   cap        `at` hash, spend in FIELD1, holds in FIELD2 (with FLAG 'month', the UTC month appended)
--   window     `at` hash, the window's number in FIELD1, the count in FIELD2; FLAG 'giveBack': the
--              settlement returns the unused part of what was counted
--   in_flight  `at` sorted set of request ids scored by their hold's deadline
-- and where its limit is read: the hash and field of its own (LIMIT_AT, LIMIT_FIELD) and of a default
-- (DEFAULT_AT, DEFAULT_FIELD), the first set one in force, '' for none. A name (AT, LIMIT_AT,
-- DEFAULT_AT) is completed by the id of the scope named in the slot after it ('' : complete), and is
-- relative to the account's hash tag: every bucket lives in the account's slot, whatever is sent.
-- SLOTS, the slots' positions (KIND .. DEFAULT_FIELD) and DECLARED are written above this file by
-- scripts.ts from buckets.ts (BUCKET_SLOTS, declaredBucketsLua). DECLARED holds every declared limit's
-- bucket, its names to complete with the request's ids; a bucket whose scope has no id ('') is not on
-- the path.
-- A hold keeps its buckets with complete names as one string, the slots joined by '\n'; holds written
-- before kept them as JSON (field `b`), still read here.
-- scripts.ts prepends this file (after common.lua) to reserve, settle, settle-batch and reap.

-- The account's key prefix `<ns>:{<accountId>}:`, from the account hash's name.
local function tagPrefix(accountKey)
  return string.sub(accountKey, 1, #accountKey - #'account')
end

-- A description: the slots `d`, the offsets of the buckets on the path (`at`, in order) and the ids
-- names are completed with (`ids`, by scope).
local function onPath(d, ids)
  local at = {}
  for o = 0, #d - SLOTS, SLOTS do
    local scope = d[o + AT_ID]
    if scope == '' or ids[scope] ~= '' then at[#at + 1] = o end
  end
  return {d = d, at = at, ids = ids}
end

-- The buckets the gateway declares, on the path of a request with these ids ('' for none).
local function declared(keyId, teamId, memberId)
  return onPath(DECLARED, {[''] = '', key = keyId, team = teamId, member = memberId})
end

-- The buckets a hold kept (one string; JSON as holds kept them before), names complete.
local function kept(held)
  local d = {}
  if string.sub(held, 1, 1) == '[' then
    for _, b in ipairs(cjson.decode(held)) do
      local own, default = (b.limit or {})[1] or {}, (b.limit or {})[2] or {}
      local flag = ''
      if b.per == 'month' then flag = 'month' elseif b.giveBack then flag = 'giveBack' end
      local slots = {b.kind, b.unit, b.reason, b.at, '', b.funds or b.spent or b.window or '', b.held or b.count or '',
        flag, own[1] or '', '', own[2] or '', default[1] or '', '', default[2] or ''}
      for j = 1, SLOTS do d[#d + 1] = slots[j] end
    end
  else
    local from = 1
    while true do
      local at = string.find(held, '\n', from, true)
      if not at then
        d[#d + 1] = string.sub(held, from)
        break
      end
      d[#d + 1] = string.sub(held, from, at - 1)
      from = at + 1
    end
  end
  return onPath(d, {[''] = ''})
end

-- A name of bucket `o` (slot AT, LIMIT_AT or DEFAULT_AT), complete and under the account's tag.
local function nameOf(prefix, desc, o, slot)
  local d = desc.d
  return prefix .. d[o + slot] .. desc.ids[d[o + slot + 1]]
end

-- A bucket's field for a month: monthly spend and holds are kept per UTC month.
local function fieldFor(d, o, slot, month)
  if d[o + FLAG] == 'month' then return d[o + slot] .. month end
  return d[o + slot]
end

-- The limit in force: the first set one of the bucket's sources, its own (from = 1) or its default
-- (from = 2); nil: no limit.
local function limitOf(prefix, desc, o, from)
  local d = desc.d
  if (from or 1) == 1 and d[o + LIMIT_AT] ~= '' then
    local v = redis.call('HGET', nameOf(prefix, desc, o, LIMIT_AT), d[o + LIMIT_FIELD])
    if v then return tonumber(v) end
  end
  if d[o + DEFAULT_AT] ~= '' then
    local v = redis.call('HGET', nameOf(prefix, desc, o, DEFAULT_AT), d[o + DEFAULT_FIELD])
    if v then return tonumber(v) end
  end
  return nil
end

-- What a money bucket has room for now (may be negative), or nil when it has no limit.
local function roomOf(prefix, desc, o, month)
  local d = desc.d
  local kind, at = d[o + KIND], nameOf(prefix, desc, o, AT)
  if kind == 'balance' then
    local v = redis.call('HMGET', at, d[o + FIELD1], d[o + FIELD2])
    return num(v[1]) - num(v[2])
  end
  if kind ~= 'cap' then return nil end
  local limit = limitOf(prefix, desc, o)
  if not limit then return nil end
  local v = redis.call('HMGET', at, fieldFor(d, o, FIELD1, month), fieldFor(d, o, FIELD2, month))
  return limit - num(v[1]) - num(v[2])
end

-- Gives `amount` held by a hold of `month` back to every money bucket it drew from.
local function releaseHeld(prefix, desc, month, amount)
  local d = desc.d
  for _, o in ipairs(desc.at) do
    local kind = d[o + KIND]
    if kind == 'balance' or kind == 'cap' then
      redis.call('HINCRBY', nameOf(prefix, desc, o, AT), fieldFor(d, o, FIELD2, month), s(-amount))
    end
  end
end

-- Charges `amount` into every money bucket: the balance is drawn down, caps count it as spend.
local function chargeInto(prefix, desc, month, amount)
  local d = desc.d
  for _, o in ipairs(desc.at) do
    local kind = d[o + KIND]
    if kind == 'balance' then
      redis.call('HINCRBY', nameOf(prefix, desc, o, AT), d[o + FIELD1], s(-amount))
    elseif kind == 'cap' then
      redis.call('HINCRBY', nameOf(prefix, desc, o, AT), fieldFor(d, o, FIELD1, month), s(amount))
    end
  end
end
