-- state.lua: prepended (by scripts.go) to every script that may change a
-- promotion's sale state: q.lua, return.lua, patch.lua, stop.lua, delete.lua and
-- ended.lua. Each change is recorded, in the same call as the write that made it,
-- in the shard's state outbox (sorted set, lua.StateOutboxKey: change by its time
-- in unix ms) and returned in the script's answer; the caller publishes it on the
-- promo-state topic and removes it from the outbox, and the reconciler publishes
-- what a crash left there (statedue.lua). docs/CONTRACT.md, "Promotion state events".
--
-- A change is the string "<seq>|<state>|<promotion key>|<nowMs>". seq orders the
-- changes of one promotion: max(last seq + 1, nowMs), so it keeps growing when the
-- hash and its last seq are lost (a delete and re-create, a rebuild).

-- record writes a change of key, seq from hash, to the outbox and returns it.
local function record(outbox, hash, key, state, now)
  local seq = math.max((tonumber(redis.call('HGET', hash, 'sseq')) or 0) + 1, now)
  if redis.call('EXISTS', hash) == 1 then
    redis.call('HSET', hash, 'sseq', string.format('%.0f', seq))
  end
  local change = string.format('%.0f|%s|%s|%.0f', seq, state, key, now)
  redis.call('ZADD', outbox, now, change)
  return change
end

-- A bucket of a promotion in buckets (field buckets above 1) announces no sale
-- state of its own: its stock is a share, not the sale's. Its selling out and
-- restocking become BUCKET_EMPTY and BUCKET_FILLED under the bucket's key: never
-- published, they are relayed to bucket 0 (bucketstate.lua), which announces the
-- sale's SOLD_OUT once every bucket is empty and RESTOCKED when one refills. The
-- sale's STOPPED, ENDED and DELETED are announced by bucket 0, the promotion key;
-- a bucket other than 0 answers nil to them (docs/CONTRACT.md, "Buckets").
local function announce(outbox, hash, key, state, now)
  if (tonumber(redis.call('HGET', hash, 'buckets')) or 1) > 1 then
    if state == 'SOLD_OUT' then
      state = 'BUCKET_EMPTY'
    elseif state == 'RESTOCKED' then
      state = 'BUCKET_FILLED'
    elseif string.find(key, ':b', 1, true) then
      return nil
    end
  end
  return record(outbox, hash, key, state, now)
end

-- saleLive: whether the sale of a promotion hash can still take stock, so that
-- SOLD_OUT and RESTOCKED mean something to a buyer: ACTIVE, not past its end.
local function saleLive(hash, now)
  local h = redis.call('HMGET', hash, 'state', 'endMs', 'ended')
  return h[1] == 'ACTIVE' and now < (tonumber(h[2]) or 0) and not h[3]
end

