-- return.lua: give a take back, or record that the CANCEL owed for a returned take
-- was acknowledged. Idempotent: a second call with the same arguments changes nothing.
--
-- KEYS: 6 per item, in promo.Keys order (hash, pins, ips, req, pending, env),
--       repeated, then the shard's state outbox (state.lua, lua.StateOutboxKey).
-- ARGV:
--   [1] requestId
--   [2] pin     cancel: must be the pin that took (entry.p), else NOT_FOUND;
--               undo, abort, finalize: not checked (may be "")
--   [3] mode    "undo" | "abort" | "cancel" | "finalize"
--   [4] nowMs   time of the call (of a RESTOCKED change, state.lua)
--   [5] reason  cancel: stored in the entry as field r; abort: stored when not "";
--               otherwise ignored (may be "")
-- Returns:
--   {0 RETURNED, count, changes... [, envelopes]}
--                          count = entries changed by this call (stock returned,
--                          or for finalize: entries finalized); then a RESTOCKED
--                          change (state.lua) for each promotion, ACTIVE and
--                          before its end, whose stock this call raised from 0
--                          (BUCKET_FILLED for a bucket's hash);
--                          then, when the call gave back parts of an envelope
--                          pool, one array with an array per item: {amount,
--                          index...} of the parts given back ({} for the others;
--                          answered even when the pool went with its promotion)
--   {1 ALREADY_RETURNED}   nothing to do for any entry; nothing changed
--   {2 NOT_FOUND}          an entry is missing (undo: skipped instead), or cancel:
--                          entry.p ~= pin, or the entry was never granted (A, X)
--   {3 COMMITTED}          undo/abort: an entry is G; nothing changed
--   {4 PENDING}            cancel: an entry is P (not granted yet); nothing changed
-- Every entry is checked before anything is written; when several entries refuse,
-- the lowest code wins (NOT_FOUND before COMMITTED before PENDING).
--
-- Ledger states: P pending, G committed, A aborted (CANCEL owed), X aborted and its
-- CANCEL acknowledged, C cancelled (CANCEL owed), R cancelled and its CANCEL
-- acknowledged. A and C stay in pending with score 0 (due at once).
--
-- Per mode and entry state (skip = nothing to do for this entry):
--   undo      P -> stock back, HDEL the entry, ZREM pending   G -> COMMITTED
--             A X C R -> skip   missing -> skip
--   abort     P -> A, stock back, ZADD pending 0               G -> COMMITTED
--             A X C R -> skip
--   cancel    G -> C, stock back, r = reason, ZADD pending 0   P -> PENDING
--             A X -> NOT_FOUND   C R -> skip
--   finalize  A -> X, C -> R, ZREM pending (no stock change)   P G X R -> skip
-- Stock back: remaining += n (only if the promotion hash still exists), pins[p] and
-- ips[i] -= n (the field is deleted when it would reach 0 or less, so neither ever
-- goes negative). A part of a bucketed grab (entry.k, see q.lua) gives back only
-- what it took; a part that took no stock was never a unit of the GRAB event, so
-- no CANCEL is owed for it: abort and cancel take it straight to X and R.
-- An entry of an envelope pool (fields a and e, see q.lua) puts its parts back in
-- the pool, each at its own index, so they are the next drawn, and envLeft += a.

if #KEYS < 7 or #KEYS % 6 ~= 1 or #ARGV ~= 5 or ARGV[1] == '' then
  error('return.lua: want 6 KEYS per item, then the outbox, and ARGV requestId, pin, mode, nowMs, reason')
end
local rid, pin, mode, reason = ARGV[1], ARGV[2], ARGV[3], ARGV[5]
if mode ~= 'undo' and mode ~= 'abort' and mode ~= 'cancel' and mode ~= 'finalize' then
  error('return.lua: bad mode')
end
local now = tonumber(ARGV[4])
if not now then
  error('return.lua: bad nowMs')
end
local n = (#KEYS - 1) / 6

local NOT_FOUND, COMMITTED, PENDING = 2, 3, 4

-- What each mode does with an entry in each state: an action name, 'skip', or a
-- refusal code.
local plan = {
  undo = {P = 'forget', G = COMMITTED, A = 'skip', X = 'skip', C = 'skip', R = 'skip'},
  abort = {P = 'abort', G = COMMITTED, A = 'skip', X = 'skip', C = 'skip', R = 'skip'},
  cancel = {P = PENDING, G = 'cancel', A = NOT_FOUND, X = NOT_FOUND, C = 'skip', R = 'skip'},
  finalize = {P = 'skip', G = 'skip', A = 'final', X = 'skip', C = 'final', R = 'skip'},
}

-- Check phase: read and classify every entry, write nothing.
local entries, actions, seen = {}, {}, {}
local refusal, todo = nil, 0
for i = 1, n do
  local b = 6 * (i - 1)
  if seen[KEYS[b + 1]] then
    error('return.lua: a promotion is listed twice')
  end
  seen[KEYS[b + 1]] = true
  local raw = redis.call('HGET', KEYS[b + 4], rid)
  local action
  if not raw then
    if mode == 'undo' then
      action = 'skip'
    else
      action = NOT_FOUND
    end
  else
    local entry = cjson.decode(raw)
    action = plan[mode][entry.s]
    if action == nil then
      error('return.lua: unknown ledger state')
    end
    if mode == 'cancel' and entry.p ~= pin then
      action = NOT_FOUND
    end
    entries[i] = entry
  end
  if type(action) == 'number' then
    if not refusal or action < refusal then
      refusal = action
    end
  elseif action ~= 'skip' then
    todo = todo + 1
  end
  actions[i] = action
end
if refusal then
  return {refusal}
end
if todo == 0 then
  return {1}
end

-- Apply phase.
local function release(key, field, num)
  local held = tonumber(redis.call('HGET', key, field)) or 0
  if held - num > 0 then
    redis.call('HINCRBY', key, field, -num)
  else
    redis.call('HDEL', key, field)
  end
end

local function has(entry, letter)
  return entry.k == nil or entry.k:find(letter) ~= nil
end

local out, envelopes, anyPool = {0, 0}, {}, false

local function giveBack(i, b, entry)
  local num = tonumber(entry.n) or 0
  local live = has(entry, 's') and redis.call('EXISTS', KEYS[b + 1]) == 1
  if live then
    local key = KEYS[b + 1]
    if redis.call('HINCRBY', key, 'remaining', num) == num and saleLive(key, now) then
      out[#out + 1] = announce(KEYS[#KEYS], key, key, 'RESTOCKED', now)
    end
  end
  if entry.e then
    -- Answered even when the pool is gone with its promotion: the buyer no longer
    -- holds these envelopes, and the CANCEL names them so the record nets to the unit.
    local back = {tonumber(entry.a)}
    for member, idx in string.gmatch(entry.e, '((%d+):%d+)') do
      if live then
        redis.call('ZADD', KEYS[b + 6], idx, member)
      end
      back[#back + 1] = tonumber(idx)
    end
    if live then
      redis.call('HINCRBY', KEYS[b + 1], 'envLeft', entry.a)
    end
    envelopes[i], anyPool = back, true
  end
  if has(entry, 'p') then
    release(KEYS[b + 2], entry.p, num)
  end
  if has(entry, 'i') then
    release(KEYS[b + 3], entry.j or entry.i, num) -- j: the take's ip key (q.lua)
  end
end

local next_state = {abort = 'A', cancel = 'C'}
local final_state = {A = 'X', C = 'R'}

for i = 1, n do
  local b = 6 * (i - 1)
  local entry, action = entries[i], actions[i]
  envelopes[i] = {}
  if action == 'forget' then
    giveBack(i, b, entry)
    redis.call('HDEL', KEYS[b + 4], rid)
    redis.call('ZREM', KEYS[b + 5], rid)
  elseif action == 'abort' or action == 'cancel' then
    giveBack(i, b, entry)
    entry.s = next_state[action]
    if reason ~= '' or action == 'cancel' then
      entry.r = reason
    end
    if has(entry, 's') then
      redis.call('ZADD', KEYS[b + 5], 0, rid)
    else -- nothing of the record to net out
      entry.s = final_state[entry.s]
      redis.call('ZREM', KEYS[b + 5], rid)
    end
    redis.call('HSET', KEYS[b + 4], rid, cjson.encode(entry))
  elseif action == 'final' then
    entry.s = final_state[entry.s]
    redis.call('HSET', KEYS[b + 4], rid, cjson.encode(entry))
    redis.call('ZREM', KEYS[b + 5], rid)
  end
end
out[2] = todo
if anyPool then
  out[#out + 1] = envelopes
end
return out
