-- patch.lua: change a live promotion's spec; stock never drops below what is granted.
-- Version-guarded: replaying the same ver is harmless, an older ver is refused.
--
-- KEYS: [1] C_<promoId>_<type>  [2] the shard's fence marker (promo.FenceKey)
--       [3] the shard's state outbox (state.lua, lua.StateOutboxKey)
-- ARGV: [1] ver  [2] total  [3] perPin  [4] perIp  [5] maxPerGrab  [6] rateLimit
--       [7] rateWindowMs  [8] startMs  [9] endMs  [10] nowMs
--       [11] channels: the bitmask of the channels the promotion is sold on (as
--            create.lua's; 0 = every channel, the field removed)
--       [12] optional: fromVer. The patch then applies only to a hash at version
--            fromVer (a compare-and-set that may set ver lower): the admin uses it
--            to take a bucket back to the committed spec when a change of a
--            promotion in buckets is undone (promo-admin's journal)
-- granted = total - remaining (takes pending commit included).
-- Returns (admin codes, shared by create/patch/stop/delete):
--   {0 OK, remaining, granted [, change]}    applied: remaining = new total - granted;
--                                            a change (state.lua) when the sale is
--                                            live and remaining crossed 0: SOLD_OUT
--                                            or RESTOCKED; or when it had ENDED and
--                                            the new endMs reopens it: RESTOCKED, or
--                                            SOLD_OUT when nothing is left
--   {1 ALREADY_APPLIED, remaining, granted}  hash ver == ver; nothing changed
--   {3 NOT_FOUND}                            no hash
--   {4 STALE}                                hash ver > ver, or with fromVer: hash ver is
--                                            neither ver nor fromVer; nothing changed
--   {5 STOPPED}                              the promotion is stopped; nothing changed
--   {6 BELOW_GRANTED, granted}               new total < granted; nothing changed
--   {7 FENCED}                               the shard is being rebuilt (fence marker set); nothing changed
-- If rateLimit or rateWindowMs change, the window restarts (winCount = winStart = 0).
-- A hash of a promotion in buckets (field buckets > 1) announces no SOLD_OUT or
-- RESTOCKED: its stock is a share, not its promotion's (state.lua's announce).

if #KEYS ~= 3 or (#ARGV ~= 11 and #ARGV ~= 12) then
  error('patch.lua: want 3 KEYS and 11 or 12 ARGV')
end
local v = {}
for i = 1, #ARGV do
  v[i] = tonumber(ARGV[i])
  if not v[i] or v[i] % 1 ~= 0 or v[i] < 0 then
    error('patch.lua: ARGV[' .. i .. '] must be a non-negative integer')
  end
end
local ver, total, now, channels = v[1], v[2], v[10], v[11]
if channels > 15 then
  error('patch.lua: channels must be a bitmask 0..15')
end

if redis.call('EXISTS', KEYS[2]) == 1 then
  return {7}
end
local h = redis.call('HMGET', KEYS[1], 'ver', 'state', 'total', 'remaining',
  'rateLimit', 'rateWindowMs', 'ended')
if not h[4] then
  return {3}
end
local cur = tonumber(h[1]) or 0
local granted = (tonumber(h[3]) or 0) - (tonumber(h[4]) or 0)
if cur == ver then
  return {1, tonumber(h[4]), granted}
end
if (v[12] and cur ~= v[12]) or (not v[12] and cur > ver) then
  return {4}
end
if h[2] == 'STOPPED' then
  return {5}
end
if total < granted then
  return {6, granted}
end

local remaining = total - granted
local wasLive, before = saleLive(KEYS[1], now), tonumber(h[4]) or 0
redis.call('HSET', KEYS[1], 'ver', ARGV[1], 'total', ARGV[2], 'remaining', remaining,
  'perPin', ARGV[3], 'perIp', ARGV[4], 'maxPerGrab', ARGV[5], 'rateLimit', ARGV[6],
  'rateWindowMs', ARGV[7], 'startMs', ARGV[8], 'endMs', ARGV[9])
if channels > 0 then
  redis.call('HSET', KEYS[1], 'channels', channels)
else
  redis.call('HDEL', KEYS[1], 'channels')
end
if tonumber(h[5]) ~= v[6] or tonumber(h[6]) ~= v[7] then
  redis.call('HSET', KEYS[1], 'winCount', 0, 'winStart', 0)
end
local state
if h[7] and now < v[9] then -- ENDED was announced, and the new end reopens the sale
  redis.call('HDEL', KEYS[1], 'ended')
  state = remaining > 0 and 'RESTOCKED' or 'SOLD_OUT'
elseif wasLive and saleLive(KEYS[1], now) and (before == 0) ~= (remaining == 0) then
  state = remaining > 0 and 'RESTOCKED' or 'SOLD_OUT'
end
if state then
  return {0, remaining, granted, announce(KEYS[3], KEYS[1], KEYS[1], state, now)}
end
return {0, remaining, granted}
