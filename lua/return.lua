-- return.lua: give a take back (rollback of an uncommitted grab, or cancel).
-- Idempotent: a second call changes nothing and answers ALREADY_RETURNED.
--
-- KEYS: 5 per item, in promo.Keys order (hash, pins, ips, req, pending), repeated.
-- ARGV:
--   [1] requestId
--   [2] pin          must be the pin that took (entry.p), else NOT_FOUND
--   [3] onlyPending  "1" = rollback/reconciler mode: refuse if any entry is G
--   [4] nowMs        time of the call; not needed by the logic, kept so every
--                    mutating script takes its time from the caller
-- Returns:
--   {0 RETURNED, number of items returned by this call}
--   {1 ALREADY_RETURNED}  every entry was already R; nothing changed
--   {2 NOT_FOUND}         an entry is missing or belongs to another pin; nothing changed
--   {3 COMMITTED}         onlyPending and an entry is G; nothing changed
-- For each entry not yet R: remaining += n (only if the promotion hash still exists),
-- pins[p] and ips[i] -= n (the field is deleted when it would reach 0 or less, so
-- neither ever goes negative), entry.s = "R", ZREM pending. Entries are kept.

if #KEYS == 0 or #KEYS % 5 ~= 0 or #ARGV ~= 4 or ARGV[1] == '' then
  error('return.lua: want 5 KEYS per item and ARGV requestId, pin, onlyPending, nowMs')
end
local rid, pin, onlyPending = ARGV[1], ARGV[2], ARGV[3] == '1'
if not tonumber(ARGV[4]) then
  error('return.lua: bad nowMs')
end
local n = #KEYS / 5

local entries, seen = {}, {}
for i = 1, n do
  local b = 5 * (i - 1)
  if seen[KEYS[b + 1]] then
    error('return.lua: a promotion is listed twice')
  end
  seen[KEYS[b + 1]] = true
  local raw = redis.call('HGET', KEYS[b + 4], rid)
  if not raw then
    return {2}
  end
  local entry = cjson.decode(raw)
  if entry.p ~= pin then
    return {2}
  end
  entries[i] = entry
end

local open = 0
for i = 1, n do
  local s = entries[i].s
  if onlyPending and s == 'G' then
    return {3}
  end
  if s ~= 'R' then
    open = open + 1
  end
end
if open == 0 then
  return {1}
end

local function release(key, field, num)
  local held = tonumber(redis.call('HGET', key, field)) or 0
  if held - num > 0 then
    redis.call('HINCRBY', key, field, -num)
  else
    redis.call('HDEL', key, field)
  end
end

for i = 1, n do
  local b = 5 * (i - 1)
  local entry = entries[i]
  if entry.s ~= 'R' then
    local num = tonumber(entry.n) or 0
    if redis.call('EXISTS', KEYS[b + 1]) == 1 then
      redis.call('HINCRBY', KEYS[b + 1], 'remaining', num)
    end
    release(KEYS[b + 2], entry.p, num)
    release(KEYS[b + 3], entry.i, num)
    entry.s = 'R'
    redis.call('HSET', KEYS[b + 4], rid, cjson.encode(entry))
    redis.call('ZREM', KEYS[b + 5], rid)
  end
end
return {0, open}
