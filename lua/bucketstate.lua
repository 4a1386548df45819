-- bucketstate.lua: bucket 0 of a promotion in buckets hears that one of its
-- buckets emptied or refilled (a BUCKET_EMPTY or BUCKET_FILLED change from that
-- bucket's shard, relayed by whoever publishes that shard's outbox: state.lua)
-- and announces the sale's SOLD_OUT when every bucket is empty, and RESTOCKED
-- when one refills after that, once each, while the sale is live.
--
-- KEYS: [1] C_<promoId>_<type> (bucket 0)  [2] its shard's state outbox
-- ARGV: [1] nowMs  [2] the bucket's key (KEYS[1] itself, or KEYS[1]..':b<label>')
--       [3] the change's seq  [4] 1: the bucket emptied, 0: it refilled
-- Bucket 0 keeps, per bucket, the seq and emptiness of the last change it applied
-- (field bs:<bucket key> = "<seq>:<0|1>"), how many buckets are empty (bempty)
-- and whether SOLD_OUT was the sale's last stock state announced (bsold = 1). A
-- change no newer than the one applied for its bucket changes nothing, so relays
-- may repeat and arrive in any order. A bucket never heard of counts as not
-- empty: create gives every bucket at least one unit.
-- Returns {0 [, change]}: applied, with the sale's change if it made one (state.lua);
--         {1}: nothing to apply (no such hash, not in buckets, or a stale change).

if #KEYS ~= 2 or #ARGV ~= 4 then
  error('bucketstate.lua: want KEYS bucket 0, outbox and ARGV nowMs, bucket key, seq, empty')
end
local now, bucket, seq, empty = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
if not now or not seq or (empty ~= '0' and empty ~= '1')
    or (bucket ~= KEYS[1] and string.sub(bucket, 1, #KEYS[1] + 2) ~= KEYS[1] .. ':b') then
  error('bucketstate.lua: bad nowMs, seq or emptiness, or a bucket of another promotion')
end

local k = tonumber(redis.call('HGET', KEYS[1], 'buckets')) or 0
if k < 2 then
  return {1}
end
local field = 'bs:' .. bucket
local lastSeq, lastEmpty = 0, '0'
local last = redis.call('HGET', KEYS[1], field)
if last then
  local s, e = string.match(last, '^(%d+):([01])$')
  lastSeq, lastEmpty = tonumber(s) or 0, e or '0'
end
if seq <= lastSeq then
  return {1}
end
redis.call('HSET', KEYS[1], field, string.format('%.0f:%s', seq, empty))
local emptied = tonumber(redis.call('HGET', KEYS[1], 'bempty')) or 0
if empty ~= lastEmpty then
  emptied = math.max(emptied + (empty == '1' and 1 or -1), 0)
  redis.call('HSET', KEYS[1], 'bempty', emptied)
end

if not saleLive(KEYS[1], now) then
  return {0}
end
local sold = redis.call('HGET', KEYS[1], 'bsold') == '1'
if emptied >= k and not sold then
  redis.call('HSET', KEYS[1], 'bsold', 1)
  return {0, record(KEYS[2], KEYS[1], KEYS[1], 'SOLD_OUT', now)}
elseif emptied < k and sold then
  redis.call('HDEL', KEYS[1], 'bsold')
  return {0, record(KEYS[2], KEYS[1], KEYS[1], 'RESTOCKED', now)}
end
return {0}
