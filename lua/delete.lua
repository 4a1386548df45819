-- delete.lua: remove a promotion and its companions from Redis (MySQL keeps the record).
--
-- KEYS: [1] C_<promoId>_<type>  [2] {..}:pins  [3] {..}:ips  [4] {..}:req  [5] {..}:pending
--       [6] the shard's fence marker (promo.FenceKey)
-- ARGV: [1] ver     the version of the delete; not checked, a delete always wins
--       [2] keepMs  how long the request ledger and pending set stay when takes are
--                   still open (> 0)
-- Returns (admin codes, shared by create/patch/stop/delete):
--   {0 OK}         the hash and its companions are gone
--   {3 NOT_FOUND}  the hash was already gone (the companions are deleted all the same)
--   {7 FENCED}     the shard is being rebuilt (KEYS' fence marker is set); nothing changed
-- A take still open (its requestId in the pending set: a grab in flight, a killed
-- grab-service's take, a CANCEL owed) needs its ledger entry to be settled: the
-- reconciler commits or gives it back by the ledger, and the other takes of its
-- request follow what the entry says. So while the pending set is not empty the
-- ledger and the set stay, expiring after keepMs (the reconciler's sweep finds
-- them long before); grabs find no promotion either way.
-- UNLINK frees a large ledger off the main thread, keeping this call short.

if #KEYS ~= 6 or #ARGV ~= 2 then
  error('delete.lua: want 6 KEYS and 2 ARGV')
end
local keep = tonumber(ARGV[2])
if not keep or keep % 1 ~= 0 or keep <= 0 then
  error('delete.lua: keepMs must be a positive integer')
end
if redis.call('EXISTS', KEYS[#KEYS]) == 1 then
  return {7}
end
local existed = redis.call('UNLINK', KEYS[1])
redis.call('UNLINK', KEYS[2], KEYS[3])
if redis.call('ZCARD', KEYS[5]) > 0 then
  redis.call('PEXPIRE', KEYS[4], keep)
  redis.call('PEXPIRE', KEYS[5], keep)
else
  redis.call('UNLINK', KEYS[4], KEYS[5])
end
if existed == 0 then
  return {3}
end
return {0}
