-- reclaim.lua: rewrite a request index entry only if it is still the one the
-- caller last saw (compare and set), keeping its expiry. grab-service rewrites a
-- grab's entry with the bucket its next attempt takes from (a fall-over, docs/
-- CONTRACT.md "Buckets"); two sends of one requestId never both move its takes:
-- the one whose view is stale stops.
--
-- KEYS: [1] R_<requestId>
-- ARGV: [1] the entry as the caller last saw it  [2] the new entry
-- Returns 1 when rewritten, 0 when the entry is another (or gone).

if #KEYS ~= 1 or #ARGV ~= 2 then
  error('reclaim.lua: want 1 KEY and 2 ARGV')
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[2], 'KEEPTTL')
return 1
