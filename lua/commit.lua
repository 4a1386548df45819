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
-- error before any write of any request. The work is commitRequests'
-- (ledgercommit.lua, prepended), which q.lua shares for the commits riding a take.

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

for r, req in ipairs(requests) do
  if req[1] == '' then
    error('commit.lua: empty requestId')
  end
  local seen, items = {}, {}
  for i = req[2], req[3] do
    local b = 6 * (i - 1)
    if seen[KEYS[b + 1]] then
      error('commit.lua: a promotion is listed twice')
    end
    seen[KEYS[b + 1]] = true
    items[#items + 1] = {KEYS[b + 4], KEYS[b + 5]}
  end
  requests[r] = {req[1], items}
end
return commitRequests(requests)
