-- delete.lua: remove a promotion from Redis (MySQL keeps the record).
--
-- KEYS: [1] C_<promoId>_<type>  [2] {..}:pins  [3] {..}:ips  [4] {..}:req  [5] {..}:pending
--       [6] {..}:env  [7] the shard's fence marker (promo.FenceKey)
--       [8] the shard's state outbox (state.lua, lua.StateOutboxKey)
-- ARGV: [1] ver     the version of the delete; not checked, a delete always wins
--       [2] keepMs  how long the request ledger and pending set stay (> 0)
--       [3] nowMs
-- Returns (admin codes, shared by create/patch/stop/delete):
--   {0 OK, change} the hash, pins, ips and pool are gone; the ledger and pending set
--                  expire; the DELETED change (state.lua)
--   {3 NOT_FOUND}  the hash was already gone (the rest is done all the same)
--   {7 FENCED}     the shard is being rebuilt (KEYS' fence marker is set); nothing changed
-- Grabs find no promotion at once. The request ledger and the pending set stay for
-- keepMs: a take still open (a grab in flight, a killed grab-service's take, a
-- CANCEL owed) is settled by its ledger entry, and every take of a multi-item
-- request follows the entry of its anchor, which may be this promotion's, open or
-- settled. Expiring keys are freed off the main thread where the server runs with
-- lazyfree-lazy-expire (deploy/), as UNLINK frees the others.

if #KEYS ~= 8 or #ARGV ~= 3 then
  error('delete.lua: want 8 KEYS and 3 ARGV')
end
local keep, now = tonumber(ARGV[2]), tonumber(ARGV[3])
if not keep or keep % 1 ~= 0 or keep <= 0 or not now then
  error('delete.lua: keepMs must be a positive integer, nowMs a number')
end
if redis.call('EXISTS', KEYS[7]) == 1 then
  return {7}
end
local change
if redis.call('EXISTS', KEYS[1]) == 1 then
  change = announce(KEYS[8], KEYS[1], KEYS[1], 'DELETED', now)
end
local existed = redis.call('UNLINK', KEYS[1])
redis.call('UNLINK', KEYS[2], KEYS[3], KEYS[6])
redis.call('PEXPIRE', KEYS[4], keep)
redis.call('PEXPIRE', KEYS[5], keep)
if existed == 0 then
  return {3}
end
return {0, change}
