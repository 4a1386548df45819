-- holddue.lua: the holds due, leased to the caller that will return them.
--
-- KEYS: [1] the shard's holds sorted set (requestId by deadline, unix ms)
--       [2] its expiring sorted set (requestId by the end of its lease)
-- ARGV: [1] nowMs  [2] leaseMs  [3] limit (1..1000)
-- Moves up to limit holds whose deadline has passed into expiring, then returns
-- up to limit requestIds of expiring whose lease has run out (just moved, or left
-- by an instance that died before it finished the return), each leased anew until
-- nowMs + leaseMs: one instance returns a grant at a time, and a return that
-- never finished is taken up again once its lease ends. The caller removes a
-- requestId from expiring (ZREM) once its return is definite.

local now, lease, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if #KEYS ~= 2 or #ARGV ~= 3 or not now or not lease or lease < 1 or not limit or limit < 1 or limit > 1000 then
  error('holddue.lua: want KEYS holds, expiring and ARGV nowMs, leaseMs >= 1, limit 1..1000')
end
for _, rid in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit)) do
  redis.call('ZREM', KEYS[1], rid)
  redis.call('ZADD', KEYS[2], now, rid)
end
local out = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, limit)
for _, rid in ipairs(out) do
  redis.call('ZADD', KEYS[2], now + lease, rid)
end
return out
