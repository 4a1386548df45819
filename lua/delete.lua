-- delete.lua: remove a promotion and its companions from Redis (MySQL keeps the record).
--
-- KEYS: [1] C_<promoId>_<type>  [2] {..}:pins  [3] {..}:ips  [4] {..}:req  [5] {..}:pending
-- ARGV: [1] ver (the version of the delete; not checked, a delete always wins)
-- Returns (admin codes, shared by create/patch/stop/delete):
--   {0 OK}         the hash and its companions are gone
--   {3 NOT_FOUND}  the hash was already gone (the companions are deleted all the same)
-- UNLINK frees a large ledger off the main thread, keeping this call short.

if #KEYS ~= 5 or #ARGV ~= 1 then
  error('delete.lua: want 5 KEYS and 1 ARGV')
end
local existed = redis.call('UNLINK', KEYS[1])
redis.call('UNLINK', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
if existed == 0 then
  return {3}
end
return {0}
