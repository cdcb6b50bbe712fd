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

-- The hashes one script call reads and writes, each read with one HMGET and written with one HSET
-- (issue 41: a command per field cost Redis more than the work itself). `need` names the fields a call
-- will read, `fetch` reads them together; a field not named is read alone when asked for. Writes are
-- computed here and kept until `flush`: the script is atomic, so a computed HSET is what HINCRBY was.
-- Values are as HMGET gives them: a string, or false when absent. Names are relative to the tag.
local function viewOf(prefix)
  return {prefix = prefix, vals = {}, want = {}, wantOrder = {}, put = {}, putOrder = {}}
end

local function need(view, at, field)
  local w = view.want[at]
  if not w then
    w = {seen = {}}
    view.want[at] = w
    view.wantOrder[#view.wantOrder + 1] = at
  end
  if not w.seen[field] then
    w.seen[field] = true
    w[#w + 1] = field
  end
end

local function fetch(view)
  for _, at in ipairs(view.wantOrder) do
    local fields = view.want[at]
    local m = view.vals[at]
    if not m then
      m = {}
      view.vals[at] = m
    end
    local v = redis.call('HMGET', view.prefix .. at, unpack(fields))
    for i, f in ipairs(fields) do
      if m[f] == nil then m[f] = v[i] end
    end
  end
  view.want, view.wantOrder = {}, {}
end

local function get(view, at, field)
  local m = view.vals[at]
  if not m then
    m = {}
    view.vals[at] = m
  end
  local v = m[field]
  if v == nil then
    v = redis.call('HGET', view.prefix .. at, field)
    m[field] = v
  end
  return v
end

local function put(view, at, field, value)
  local p = view.put[at]
  if not p then
    p = {}
    view.put[at] = p
    view.putOrder[#view.putOrder + 1] = at
  end
  if p[field] == nil then p[#p + 1] = field end
  p[field] = value
  if not view.vals[at] then view.vals[at] = {} end
  view.vals[at][field] = value
end

-- Adds `delta` to an integer field (what HINCRBY did); returns the new value.
local function add(view, at, field, delta)
  local v = num(get(view, at, field)) + delta
  put(view, at, field, s(v))
  return v
end

-- Writes what the call changed: one HSET per hash.
local function flush(view)
  for _, at in ipairs(view.putOrder) do
    local p = view.put[at]
    local args = {}
    for _, f in ipairs(p) do
      args[#args + 1] = f
      args[#args + 1] = p[f]
    end
    redis.call('HSET', view.prefix .. at, unpack(args))
  end
  view.put, view.putOrder = {}, {}
end

-- Names the fields a bucket is counted in (money: spend and holds of `month`; windows: with `windows`)
-- and, with `limits`, those its limit is read from, for one `fetch`.
local function needBucket(view, b, month, limits, windows)
  if b.kind == 'balance' then
    need(view, b.at, b.funds)
    need(view, b.at, b.held)
  elseif b.kind == 'cap' then
    need(view, b.at, fieldFor(b, b.spent, month))
    need(view, b.at, fieldFor(b, b.held, month))
  elseif b.kind == 'window' and windows then
    need(view, b.at, b.window)
    need(view, b.at, b.count)
  end
  if limits then
    for _, src in ipairs(b.limit or {}) do need(view, src[1], src[2]) end
  end
end

-- The limit in force: the first of the bucket's sources that is set (nil: no limit).
local function limitOf(view, b)
  for _, src in ipairs(b.limit or {}) do
    local v = get(view, src[1], src[2])
    if v then return tonumber(v) end
  end
  return nil
end

-- What a money bucket has room for now (may be negative), or nil when it has no limit.
local function roomOf(view, b, month)
  if b.kind == 'balance' then
    return num(get(view, b.at, b.funds)) - num(get(view, b.at, b.held))
  end
  if b.kind ~= 'cap' then return nil end
  local limit = limitOf(view, b)
  if not limit then return nil end
  return limit - num(get(view, b.at, fieldFor(b, b.spent, month))) - num(get(view, b.at, fieldFor(b, b.held, month)))
end

-- Gives `amount` held by a hold of `month` back to every money bucket it drew from.
local function releaseHeld(view, buckets, month, amount)
  for _, b in ipairs(buckets) do
    if b.kind == 'balance' then
      add(view, b.at, b.held, -amount)
    elseif b.kind == 'cap' then
      add(view, b.at, fieldFor(b, b.held, month), -amount)
    end
  end
end

-- Charges `amount` into every money bucket: the balance is drawn down, caps count it as spend.
local function chargeInto(view, buckets, month, amount)
  for _, b in ipairs(buckets) do
    if b.kind == 'balance' then
      add(view, b.at, b.funds, -amount)
    elseif b.kind == 'cap' then
      add(view, b.at, fieldFor(b, b.spent, month), amount)
    end
  end
end
