-- claimhold.lua: claim a requestId in the request index and, when this call is
-- the one that claims it, register the grant's hold, in one step: every take of a
-- held grab follows its claim, so a held grant always has its hold registered,
-- whatever crashes where.
--
-- KEYS: [1] R_<requestId>, the index entry  [2] the shard's holds sorted set
-- ARGV: [1] the index entry  [2] its TTL in seconds  [3] the hold's deadline
--       (unix ms)  [4] requestId
-- Returns the entry already there (nil when this call claimed), as SET NX GET.

if #KEYS ~= 2 or #ARGV ~= 4 or ARGV[4] == '' or not tonumber(ARGV[2]) or not tonumber(ARGV[3]) then
  error('claimhold.lua: want KEYS index, holds and ARGV entry, ttlSeconds, deadlineMs, requestId')
end
local old = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'GET', 'EX', ARGV[2])
if not old then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
end
return old
