-- stop.lua: stop a promotion now; grabs then answer STOPPED. Idempotent.
--
-- KEYS: [1] C_<promoId>_<type>  [2] the shard's fence marker (promo.FenceKey)
--       [3] the shard's state outbox (state.lua, lua.StateOutboxKey)
-- ARGV: [1] ver (the spec version the stop belongs to)  [2] nowMs
-- Returns (admin codes, shared by create/patch/stop/delete):
--   {0 OK [, change]}  state = STOPPED, ver = ARGV ver (also when already so);
--                  a STOPPED change (state.lua) when it was ACTIVE
--   {3 NOT_FOUND}  no hash
--   {4 STALE}      hash ver > ver; nothing changed
--   {7 FENCED}     the shard is being rebuilt (KEYS' fence marker is set); nothing changed

if #KEYS ~= 3 or #ARGV ~= 2 then
  error('stop.lua: want 3 KEYS and 2 ARGV')
end
local ver, now = tonumber(ARGV[1]), tonumber(ARGV[2])
if not ver or ver % 1 ~= 0 or ver < 0 or not now then
  error('stop.lua: ver must be a non-negative integer, nowMs a number')
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {7}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {3}
end
if (tonumber(redis.call('HGET', KEYS[1], 'ver')) or 0) > ver then
  return {4}
end
local was = redis.call('HGET', KEYS[1], 'state')
redis.call('HSET', KEYS[1], 'state', 'STOPPED', 'ver', ARGV[1])
if was == 'ACTIVE' then
  return {0, announce(KEYS[3], KEYS[1], KEYS[1], 'STOPPED', now)}
end
return {0}
