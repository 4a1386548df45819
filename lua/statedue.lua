-- statedue.lua: the state changes a crash left in the outbox, leased to the
-- reconciler that will publish them.
--
-- KEYS: [1] the shard's state outbox (lua.StateOutboxKey)
-- ARGV: [1] nowMs  [2] graceMs (>= 1)  [3] limit (1..1000)
-- Returns up to limit changes recorded (or last leased) graceMs or more before
-- nowMs, each scored nowMs again: the publisher that made it has had graceMs to
-- publish and remove it, and another reconciler takes it up only once this one
-- has had graceMs too. The caller removes a change (ZREM) once Kafka has it.

local now, grace, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if #KEYS ~= 1 or #ARGV ~= 3 or not now or not grace or grace < 1 or not limit or limit < 1 or limit > 1000 then
  error('statedue.lua: want KEYS outbox and ARGV nowMs, graceMs >= 1, limit 1..1000')
end
local out = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - grace, 'LIMIT', 0, limit)
for _, change in ipairs(out) do
  redis.call('ZADD', KEYS[1], now, change)
end
return out
