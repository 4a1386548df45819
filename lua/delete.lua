-- delete.lua: remove a promotion and its companions from Redis (MySQL keeps the record).
--
-- KEYS: [1] C_<promoId>_<type>  [2] {..}:pins  [3] {..}:ips  [4] {..}:req  [5] {..}:pending
--       [6] the shard's fence marker (promo.FenceKey)
-- ARGV: [1] ver (the version of the delete; not checked, a delete always wins)
-- Returns (admin codes, shared by create/patch/stop/delete):
--   {0 OK}         the hash and its companions are gone
--   {3 NOT_FOUND}  the hash was already gone (the companions are deleted all the same)
--   {7 FENCED}     the shard is being rebuilt (KEYS' fence marker is set); nothing changed
-- UNLINK frees a large ledger off the main thread, keeping this call short.

if #KEYS ~= 6 or #ARGV ~= 1 then
  error('delete.lua: want 6 KEYS and 1 ARGV')
end
if redis.call('EXISTS', KEYS[#KEYS]) == 1 then
  return {7}
end
local existed = redis.call('UNLINK', KEYS[1])
redis.call('UNLINK', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
if existed == 0 then
  return {3}
end
return {0}
