-- create.lua: create a promotion hash from its spec (version ver from MySQL).
-- Re-applying the same version is harmless, so a repair job may replay it.
--
-- KEYS: [1] C_<promoId>_<type>  [2] {..}:pins  [3] {..}:ips  [4] {..}:req  [5] {..}:pending
--       [6] {..}:env  [7] the shard's fence marker (promo.FenceKey)
--       [8] optional, an envelope pool's only: {..}:envnew, the pool's parts staged
--           by the caller (member "<index>:<amount>" scored by index, total of them)
-- ARGV: [1] ver  [2] total  [3] perPin  [4] perIp  [5] maxPerGrab  [6] rateLimit
--       [7] rateWindowMs  [8] startMs  [9] endMs  [10] state ("ACTIVE" | "STOPPED")
--       [11] channels: the bitmask of the channels the promotion is sold on
--            (APP 1, WECHAT 2, QQ 4, WEB 8; 0 = every channel), stored as field
--            channels when above 0, which q.lua checks (CHANNEL_NOT_ALLOWED)
--       [12] optional: buckets, the number of buckets of the promotion this hash is
--            one of (internal/bucket); stored as field buckets when above 1, so q.lua
--            refuses a grab that does not know it (BUCKETED)
--       [13] optional, with KEYS[8] and ARGV[12] = 1: the pool's amount, the sum of
--            its staged parts (the caller checked it); stored as envAmount and envLeft
--       [14] with ARGV[13]: the split's digest (lua.EnvelopeDigest), stored as
--            envDigest: a create of the same ver with another split is EXISTS, so a
--            create that lost its row to another can never pass for the other's
-- Returns (admin codes, shared by create/patch/stop/delete):
--   {0 OK}               created: remaining = total, winCount = winStart = 0, the
--                        five companions emptied first (leftovers of an older life);
--                        a pool's staged parts renamed to {..}:env
--   {1 ALREADY_APPLIED}  the hash exists with this ver (and, of a pool, this split); nothing changed
--   {2 EXISTS}           the hash exists with another ver; nothing changed
--   {7 FENCED}           the shard is being rebuilt (KEYS' fence marker is set); nothing changed
-- Every answer but OK drops the staged parts. Staged parts that are not total in
-- number raise an error (another create of the key restaged them meanwhile: retry).

local pool = #KEYS == 8
if not ((#KEYS == 7 and (#ARGV == 11 or #ARGV == 12)) or (pool and #ARGV == 14 and ARGV[14] ~= '')) then
  error('create.lua: want 7 KEYS and 11 or 12 ARGV, or 8 KEYS and 14 ARGV (a pool)')
end
local channels = tonumber(ARGV[11])
if not channels or channels < 0 or channels > 15 or channels % 1 ~= 0 then
  error('create.lua: channels must be a bitmask 0..15')
end
local buckets = tonumber(ARGV[12] or '1')
if not buckets or buckets < 1 or buckets > 16 or buckets % 1 ~= 0 then
  error('create.lua: buckets must be an integer 1..16')
end
local v = {}
for i = 1, 9 do
  v[i] = tonumber(ARGV[i])
  if not v[i] or v[i] % 1 ~= 0 or v[i] < 0 then
    error('create.lua: ARGV[' .. i .. '] must be a non-negative integer')
  end
end
local envAmount = tonumber(ARGV[13] or '0')
if not envAmount or envAmount % 1 ~= 0 or envAmount < 0 or (pool and buckets ~= 1) then
  error('create.lua: a pool amount must be a non-negative integer, its promotion of one bucket')
end
local state = ARGV[10]
if state ~= 'ACTIVE' and state ~= 'STOPPED' then
  error('create.lua: state must be ACTIVE or STOPPED')
end

local function refuse(code)
  if pool then
    redis.call('UNLINK', KEYS[8])
  end
  return {code}
end
if redis.call('EXISTS', KEYS[7]) == 1 then
  return refuse(7)
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  local h = redis.call('HMGET', KEYS[1], 'ver', 'envDigest')
  if tonumber(h[1]) == v[1] and h[2] == (ARGV[14] or false) then
    return refuse(1)
  end
  return refuse(2)
end
if pool and redis.call('ZCARD', KEYS[8]) ~= v[2] then
  error('create.lua: the staged pool does not hold total parts')
end

-- UNLINK frees large leftovers off the main thread, keeping this call short.
redis.call('UNLINK', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
if pool then
  redis.call('RENAME', KEYS[8], KEYS[6]) -- KEYS[6] is gone: O(1)
  redis.call('PERSIST', KEYS[6])
  redis.call('HSET', KEYS[1], 'envAmount', envAmount, 'envLeft', envAmount, 'envDigest', ARGV[14])
end
redis.call('HSET', KEYS[1],
  'ver', ARGV[1], 'total', ARGV[2], 'remaining', ARGV[2],
  'perPin', ARGV[3], 'perIp', ARGV[4], 'maxPerGrab', ARGV[5],
  'rateLimit', ARGV[6], 'rateWindowMs', ARGV[7], 'winCount', 0, 'winStart', 0,
  'startMs', ARGV[8], 'endMs', ARGV[9], 'state', state)
if buckets > 1 then
  redis.call('HSET', KEYS[1], 'buckets', buckets)
end
if channels > 0 then
  redis.call('HSET', KEYS[1], 'channels', channels)
end
return {0}
