-- ended.lua: announce ENDED once for a promotion whose sale is over (the
-- reconciler calls it for the promotions the record says have ended; q.lua
-- announces it itself when it refuses a grab as ENDED first).
--
-- KEYS: [1] C_<promoId>_<type>  [2] the shard's state outbox (lua.StateOutboxKey)
-- ARGV: [1] nowMs
-- Returns {} when there is nothing to announce (no hash, not ACTIVE, not yet at
-- its end, or ENDED already announced), else {change} (state.lua).

if #KEYS ~= 2 or #ARGV ~= 1 or not tonumber(ARGV[1]) then
  error('ended.lua: want KEYS hash, outbox and ARGV nowMs')
end
local now = tonumber(ARGV[1])
local h = redis.call('HMGET', KEYS[1], 'state', 'endMs', 'ended')
if h[1] ~= 'ACTIVE' or now < (tonumber(h[2]) or 0) or h[3] then
  return {}
end
redis.call('HSET', KEYS[1], 'ended', 1)
return {announce(KEYS[2], KEYS[1], KEYS[1], 'ENDED', now)}
