-- commit.lua: mark a take committed once its GRAB flow event is acknowledged.
--
-- KEYS: 6 per item, in promo.Keys order (hash, pins, ips, req, pending, env), repeated.
-- ARGV: [1] requestId
-- Returns:
--   {0 COMMITTED}  every entry is now G (P entries became G and left pending;
--                  G entries stay G)
--   {1 NOT_FOUND}  an item has no ledger entry for requestId; nothing changed
--   {2 RETURNED}   an entry is A, X, C or R (its stock was already given back);
--                  nothing changed. The caller must treat this as a conflict: the
--                  grant no longer exists.
-- Malformed arguments, or an entry in a state other than P G A X C R, raise a
-- script error before any write.

if #KEYS == 0 or #KEYS % 6 ~= 0 or #ARGV ~= 1 or ARGV[1] == '' then
  error('commit.lua: want 6 KEYS per item and ARGV requestId')
end
local rid = ARGV[1]
local n = #KEYS / 6

local entries, seen = {}, {}
for i = 1, n do
  local b = 6 * (i - 1)
  if seen[KEYS[b + 1]] then
    error('commit.lua: a promotion is listed twice')
  end
  seen[KEYS[b + 1]] = true
  local raw = redis.call('HGET', KEYS[b + 4], rid)
  if not raw then
    return {1}
  end
  local entry = cjson.decode(raw)
  local s = entry.s
  if s == 'A' or s == 'X' or s == 'C' or s == 'R' then
    return {2}
  end
  if s ~= 'P' and s ~= 'G' then
    error('commit.lua: unknown ledger state')
  end
  entries[i] = entry
end

for i = 1, n do
  local b = 6 * (i - 1)
  local entry = entries[i]
  if entry.s == 'P' then
    entry.s = 'G'
    redis.call('HSET', KEYS[b + 4], rid, cjson.encode(entry))
  end
  redis.call('ZREM', KEYS[b + 5], rid)
end
return {0}
