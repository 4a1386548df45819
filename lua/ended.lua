-- ended.lua: announce ENDED once for a promotion whose sale is over (the
-- reconciler calls it for the promotions the record says have ended; q.lua
-- announces it itself when it refuses a grab as ENDED first).
--
-- KEYS: [1] C_<promoId>_<type>  [2] the shard's state outbox (lua.StateOutboxKey)
-- ARGV: [1] nowMs
-- Returns {0, change} when it announced ENDED (state.lua); {1} when there is
-- nothing to announce, now or later (no hash, not ACTIVE, ENDED already
-- announced); {2} when the sale has not reached its end yet.

if #KEYS ~= 2 or #ARGV ~= 1 or not tonumber(ARGV[1]) then
  error('ended.lua: want KEYS hash, outbox and ARGV nowMs')
end
local now = tonumber(ARGV[1])
local h = redis.call('HMGET', KEYS[1], 'state', 'endMs', 'ended')
if h[1] ~= 'ACTIVE' or h[3] then
  return {1}
end
if now < (tonumber(h[2]) or 0) then
  return {2}
end
redis.call('HSET', KEYS[1], 'ended', 1)
return {0, announce(KEYS[2], KEYS[1], KEYS[1], 'ENDED', now)}
