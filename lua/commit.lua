-- commit.lua: mark takes committed once their GRAB flow events are acknowledged:
-- one request's, or a batch of requests' (the grabs one pipeline to the shard
-- carries), each decided alone.
--
-- KEYS: 6 per item, in promo.Keys order (hash, pins, ips, req, pending, env),
--       repeated: the first request's items, then the next request's...
-- ARGV: pairs requestId, its number of items (in KEYS order; they sum to #KEYS / 6)
-- Returns one code per request, in ARGV order:
--   0 COMMITTED  every entry is now G (P entries became G and left pending;
--                G entries stay G)
--   1 NOT_FOUND  an item has no ledger entry for requestId; nothing of the
--                request changed
--   2 RETURNED   an entry is A, X, C or R (its stock was already given back);
--                nothing of the request changed. The caller must treat this as
--                a conflict: the grant no longer exists.
-- A request's NOT_FOUND or RETURNED changes nothing for the others. Malformed
-- arguments, or an entry in a state other than P G A X C R, raise a script
-- error before any write of any request.

if #KEYS == 0 or #KEYS % 6 ~= 0 or #ARGV == 0 or #ARGV % 2 ~= 0 then
  error('commit.lua: want 6 KEYS per item and ARGV pairs requestId, items')
end

-- requests[r] = {requestId, first item, last item}
local requests, first = {}, 1
for a = 1, #ARGV, 2 do
  local count = tonumber(ARGV[a + 1])
  if not count or count < 1 or count % 1 ~= 0 then
    error('commit.lua: a request has a positive whole number of items')
  end
  requests[#requests + 1] = {ARGV[a], first, first + count - 1}
  first = first + count
end
if first - 1 ~= #KEYS / 6 then
  error('commit.lua: the requests\' items do not add up to the KEYS')
end

-- Read every request's entries before writing any: a bad entry anywhere then
-- stops the whole call before a write.
local codes, entries = {}, {}
for r, req in ipairs(requests) do
  local rid, seen = req[1], {}
  if rid == '' then
    error('commit.lua: empty requestId')
  end
  codes[r] = 0
  for i = req[2], req[3] do
    local b = 6 * (i - 1)
    if seen[KEYS[b + 1]] then
      error('commit.lua: a promotion is listed twice')
    end
    seen[KEYS[b + 1]] = true
    local raw = redis.call('HGET', KEYS[b + 4], rid)
    local entry = raw and cjson.decode(raw)
    local s = entry and entry.s
    if s and s ~= 'P' and s ~= 'G' and s ~= 'A' and s ~= 'X' and s ~= 'C' and s ~= 'R' then
      error('commit.lua: unknown ledger state')
    end
    if codes[r] == 0 then
      if not entry then
        codes[r] = 1
      elseif s ~= 'P' and s ~= 'G' then
        codes[r] = 2
      end
    end
    entries[i] = entry
  end
end

for r, req in ipairs(requests) do
  if codes[r] == 0 then
    for i = req[2], req[3] do
      local b = 6 * (i - 1)
      local entry = entries[i]
      if entry.s == 'P' then
        entry.s = 'G'
        redis.call('HSET', KEYS[b + 4], req[1], cjson.encode(entry))
      end
      redis.call('ZREM', KEYS[b + 5], req[1])
    end
  end
end
return codes
