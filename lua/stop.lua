-- stop.lua: stop a promotion now; grabs then answer STOPPED. Idempotent.
--
-- KEYS: [1] C_<promoId>_<type>  [2] the shard's fence marker (promo.FenceKey)
-- ARGV: [1] ver (the spec version the stop belongs to)
-- Returns (admin codes, shared by create/patch/stop/delete):
--   {0 OK}         state = STOPPED, ver = ARGV ver (also when already so)
--   {3 NOT_FOUND}  no hash
--   {4 STALE}      hash ver > ver; nothing changed
--   {7 FENCED}     the shard is being rebuilt (KEYS' fence marker is set); nothing changed

if #KEYS ~= 2 or #ARGV ~= 1 then
  error('stop.lua: want 2 KEYS and 1 ARGV')
end
local ver = tonumber(ARGV[1])
if not ver or ver % 1 ~= 0 or ver < 0 then
  error('stop.lua: ver must be a non-negative integer')
end
if redis.call('EXISTS', KEYS[#KEYS]) == 1 then
  return {7}
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {3}
end
if (tonumber(redis.call('HGET', KEYS[1], 'ver')) or 0) > ver then
  return {4}
end
redis.call('HSET', KEYS[1], 'state', 'STOPPED', 'ver', ARGV[1])
return {0}
