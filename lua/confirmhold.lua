-- confirmhold.lua: a confirm's steps on its hold, each atomic against the
-- reconciler's expiry (holddue.lua) and against other confirms of the request.
--
-- KEYS: [1] the shard's holds sorted set (requestId by deadline, unix ms)
--       [2] its confirming sorted set (the holds whose CONFIRM is being published)
--       [3] its expiring sorted set (the holds being returned)
-- ARGV: [1] 'lift' or 'restore'  [2] requestId
--
-- lift: the hold moves from holds to confirming, its deadline kept, while the
--   confirm publishes its CONFIRM; expiry no longer sees it. Returns {1, deadline}
--   when it moved, {2, deadline} when another confirm holds it in confirming (this
--   one may publish too: the record keeps the first), {3} when it is being returned,
--   {0} when there is no hold.
-- restore: the CONFIRM was not acknowledged; the hold goes back to holds at its
--   deadline, unless a confirm has been acknowledged meanwhile and taken it out of
--   confirming (ZREM, by the caller). Returns 1 when it went back, else 0.

if #KEYS ~= 3 or #ARGV ~= 2 or ARGV[2] == '' or (ARGV[1] ~= 'lift' and ARGV[1] ~= 'restore') then
  error("confirmhold.lua: want KEYS holds, confirming, expiring and ARGV 'lift' or 'restore', requestId")
end
local rid = ARGV[2]
if ARGV[1] == 'restore' then
  local deadline = redis.call('ZSCORE', KEYS[2], rid)
  if not deadline then
    return 0
  end
  redis.call('ZREM', KEYS[2], rid)
  redis.call('ZADD', KEYS[1], deadline, rid)
  return 1
end
local deadline = redis.call('ZSCORE', KEYS[1], rid)
if deadline then
  redis.call('ZREM', KEYS[1], rid)
  redis.call('ZADD', KEYS[2], deadline, rid)
  return {1, deadline}
end
deadline = redis.call('ZSCORE', KEYS[2], rid)
if deadline then
  return {2, deadline}
end
if redis.call('ZSCORE', KEYS[3], rid) then
  return {3}
end
return {0}
