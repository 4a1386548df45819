-- q.lua: the grab. Decides and takes in one call, all items or none.
--
-- KEYS: 6 per item, in promo.Keys order, repeated for each item (one shard):
--   [6(i-1)+1] C_<promoId>_<type>   promotion hash
--   [6(i-1)+2] {C_..}:pins           hash pin -> units held
--   [6(i-1)+3] {C_..}:ips            hash ip -> units held
--   [6(i-1)+4] {C_..}:req            request ledger, requestId -> JSON entry
--   [6(i-1)+5] {C_..}:pending        zset requestId scored by deadlineMs
--   [6(i-1)+6] {C_..}:env            an envelope pool's parts left (zset), else absent
--   [6n+1]     the shard's state outbox (state.lua, lua.StateOutboxKey)
--   [6n+2]     optional: the requestId's request index entry R_<requestId>, when
--              the ring places it on this shard and the grab has no other shard:
--              the claim is made here, in the take's call (README "The claim")
-- ARGV:
--   [1] nowMs  [2] requestId  [3] bodyHash  [4] pin  [5] ip
--   [6] deadlineMs (when the reconciler may look at an uncommitted take)
--   [7] rateFactorPermille (1000 = normal; limit = max(1, floor(rateLimit * f / 1000)))
--   [8] ipKey: the ip's field in {..}:ips, what the per-ip limit counts (promo.IPKey:
--       the ip itself, or an IPv6 address's prefix); the ledger keeps it as j
--       when it is not the ip, so a return releases what the take counted
--   [9] channel: the grab's channel bit (APP 1, WECHAT 2, QQ 4, WEB 8), 0 for a
--       grab that names none; checked against each hash's field channels
--   [9+i] num of item i, i = 1..n
--   [9+n+i] optional, all items or none: the part item i is of a bucketed grab, the
--           letters of what it checks and takes: s stock, p the pin's limit, i the
--           ip's limit (README "A hot promotion beyond one shard"), then the number
--           of buckets the caller believes the promotion has ("sp8"; "spi1" is an
--           ordinary item; without the number it is not checked). Absent means
--           "spi1", an ordinary item. A part without s neither checks nor takes stock;
--           the rate window is charged on parts with p only. n (every part of
--           such a grab: "spn", "pn", "sn") says the grab counts the ip nowhere:
--           allowed only while perIp is 0; the ledger keeps it, so a return and
--           the reconciler know the grab's parts from any one of them.
--   then optional: "commit:<requestId>,<requestId>...", the commits riding this
--           take: requestIds whose takes hold these same promotions (one entry
--           per item), committed as commit.lua would, before the take, whatever it
--           answers (README "The commit rides a take")
--   last two, with the index key: the request index entry to claim with, and its
--           time to live in seconds
-- Returns {code, index, ...}; index is the 0-based item concerned:
--   {0 OK, 0, remaining after item 1, ..., remaining after item n, changes... [, envelopes]}
--                                      (-1 for a part that takes no stock); then a
--                                      SOLD_OUT change (state.lua) for each
--                                      hash the take left at 0 (BUCKET_EMPTY
--                                      for a bucket's); then, when
--                                      an item is of an envelope pool, one array
--                                      with an array per item: {amount, index...}
--                                      of the parts it took ({} for an item of no pool)
--   {1 DUPLICATE, index, state [, envelopes]}
--                                      same requestId and body already in the ledger;
--                                      state is the entry's letter as stored
--                                      ("P", "G", "A", "X", "C" or "R"); envelopes as
--                                      OK's, from the entries, when one holds parts
--   {2 REQUEST_ID_REUSED, index}       same requestId, another body
--   {3 NOT_FOUND, index}               no promotion hash
--   {4 STOPPED, index}                 state is not ACTIVE
--   {5 NOT_STARTED, index, startMs}    now < startMs (the caller may refuse locally until then)
--   {6 ENDED, index [, change]}        now >= endMs; the first such answer
--                                      announces ENDED (state.lua)
--   {7 SOLD_OUT, index, remaining}     remaining is 0, or less than num (what is
--                                      left: a bucket with some left is not empty)
--   {8 RATE_LIMITED, index, retryAfterMs}
--   {9 PIN_LIMIT, index}               pin would hold more than perPin
--   {10 IP_LIMIT, index}               ip would hold more than perIp
--   {11 TOO_MANY, index}               num > maxPerGrab
--   {12 IP_PART_NEEDED, index}         part n on a promotion with an ip limit
--   {13 BUCKETED, index, buckets, ipLimit}
--                                      the hash is one of buckets buckets (field
--                                      buckets, 1 when absent) and the item said
--                                      otherwise: ask again with the layout;
--                                      ipLimit 1 when perIp > 0 (the grab must
--                                      count the ip), else 0 (letter n may leave
--                                      it out)
--   {14 CLAIMED, 0}                    with the index key only: the requestId holds
--                                      an index entry already; nothing was checked,
--                                      charged or written (claim it the usual way)
--   {15 CHANNEL_NOT_ALLOWED, index}    the hash's channels (0 or absent: every
--                                      channel) do not hold the grab's channel (a
--                                      grab of none is allowed only on every channel)
-- With riders, the reply is {the take's reply as above, {a commit.lua code per
-- rider, in order}}.
-- With the index key, the entry is written (SET EX) only with the take (OK), or
-- with a DUPLICATE (the index had lost it), as a claim made apart would be: a
-- refused grab leaves no claim behind.
-- The check phase writes nothing but the rate windows of the items it has passed
-- (an attempt counts even when a later check refuses it). Malformed arguments
-- raise a script error before any write.

-- nk and na are the item KEYS with the outbox, and the ARGV, less the claim's.
local nk, na, claimKey, claimEntry, claimTTL = #KEYS, #ARGV, nil, nil, nil
if nk % 6 == 2 then
  claimKey, claimEntry, claimTTL = KEYS[nk], ARGV[na - 1], tonumber(ARGV[na])
  nk, na = nk - 1, na - 2
  if not claimTTL or claimTTL < 1 or not claimEntry or claimEntry == '' then
    error('q.lua: a claim wants its entry and a positive time to live')
  end
end
-- The commits riding this take, before the claim (README "The commit rides a take").
local riders = nil
if na > 9 and string.sub(ARGV[na], 1, 7) == 'commit:' then
  riders, na = string.sub(ARGV[na], 8), na - 1
end
local n = (nk - 1) / 6
if nk < 7 or nk % 6 ~= 1 or (na ~= 9 + n and na ~= 9 + 2 * n) then
  error('q.lua: want 6 KEYS per item, then the outbox (then the index key), and ARGV 9 + one num per item (+ one part per item) (+ the claim)')
end
local outbox = KEYS[nk]
local now = tonumber(ARGV[1])
local rid, bodyHash, pin, ip = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local deadline = tonumber(ARGV[6])
local factor = tonumber(ARGV[7])
local ipKey = ARGV[8]
local channel = tonumber(ARGV[9])
if not now or not deadline or not factor or factor < 0 or rid == '' or ipKey == '' then
  error('q.lua: bad nowMs, deadlineMs, rateFactorPermille, requestId or ipKey')
end
if channel ~= 0 and channel ~= 1 and channel ~= 2 and channel ~= 4 and channel ~= 8 then
  error('q.lua: channel must be 0, 1, 2, 4 or 8')
end

local function int(v)
  return tonumber(v) or 0
end

-- What each item checks and takes: its part letters, all three for an ordinary
-- call (which sends none, and pays nothing here).
-- wantK is the bucket count the caller believes the item's promotion has (nil:
-- not checked); whole is true for an ordinary item ("spi" of one bucket).
local stock, pins, ips, noIP, wantK, letters = {}, {}, {}, {}, {}, {}
if na == 9 + n then
  for i = 1, n do
    stock[i], pins[i], ips[i], noIP[i], wantK[i], letters[i] = true, true, true, false, 1, 'spi'
  end
else
  local PARTS = {spi = true, sp = true, si = true, pi = true, s = true, p = true, i = true, spn = true, pn = true, sn = true}
  for i = 1, n do
    local part, k = string.match(ARGV[9 + n + i], '^(%l+)(%d*)$')
    if not part or not PARTS[part] or (k ~= '' and (tonumber(k) < 1 or tonumber(k) > 16)) then
      error('q.lua: a part is one of spi sp si pi s p i spn pn sn, then optionally 1..16')
    end
    stock[i], pins[i], ips[i], noIP[i] = part:find('s') ~= nil, part:find('p') ~= nil, part:find('i') ~= nil, part:find('n') ~= nil
    wantK[i], letters[i] = tonumber(k), part
  end
end

local nums, seen = {}, {}
for i = 1, n do
  local num = tonumber(ARGV[9 + i])
  if not num or num < 1 or num % 1 ~= 0 then
    error('q.lua: num must be a positive integer')
  end
  nums[i] = num
  local key = KEYS[6 * (i - 1) + 1]
  if seen[key] then
    error('q.lua: a promotion is listed twice')
  end
  seen[key] = true
end

-- The parts an envelope entry holds, as the reply's array: {amount, index...}.
local function envelopeOf(entry)
  local out = {}
  if entry and entry.e then
    out[1] = tonumber(entry.a)
    for idx in string.gmatch(entry.e, '(%d+):%d+') do
      out[#out + 1] = tonumber(idx)
    end
  end
  return out
end

-- The riders are committed first, whatever the take then answers: each on every
-- item of the take, decided alone, as commit.lua would.
local committed = nil
if riders then
  local items, requests = {}, {}
  for i = 1, n do
    items[i] = {KEYS[6 * (i - 1) + 4], KEYS[6 * (i - 1) + 5]}
  end
  for r in string.gmatch(riders, '[^,]+') do
    requests[#requests + 1] = {r, items}
  end
  if #requests == 0 then
    error('q.lua: commit: names no requestId')
  end
  committed = commitRequests(requests)
end

local function take()
  -- A requestId claimed already is a resend (or a reuse): the caller claims it the
  -- usual way, which tells which, and grabs again.
  if claimKey and redis.call('EXISTS', claimKey) == 1 then
    return {14, 0}
  end

  -- The ledger of every item first: a replay must take nothing and waste nothing.
  for i = 1, n do
    local raw = redis.call('HGET', KEYS[6 * (i - 1) + 4], rid)
    if raw then
      local entry = cjson.decode(raw)
      if entry.h ~= bodyHash then
        return {2, i - 1}
      end
      if claimKey then -- the index lost an entry the ledger holds: claimed again
        redis.call('SET', claimKey, claimEntry, 'EX', claimTTL)
      end
      local out, envelopes, any = {1, i - 1, entry.s}, {}, false
      for j = 1, n do -- what each item's entry handed out, for the replay's answer
        local e = entry
        if j ~= i then
          local r = redis.call('HGET', KEYS[6 * (j - 1) + 4], rid)
          e = r and cjson.decode(r)
        end
        envelopes[j] = envelopeOf(e)
        any = any or #envelopes[j] > 0
      end
      if any then
        out[4] = envelopes
      end
      return out
    end
  end

  -- Check every item before taking anything.
  local pool = {}
  for i = 1, n do
    local b = 6 * (i - 1)
    local key, num = KEYS[b + 1], nums[i]
    local h = redis.call('HMGET', key, 'remaining', 'perPin', 'perIp', 'maxPerGrab',
      'rateLimit', 'rateWindowMs', 'winCount', 'winStart', 'startMs', 'endMs', 'state', 'ended', 'buckets', 'envAmount',
      'channels')
    if not h[1] then
      return {3, i - 1}
    end
    local buckets = math.max(int(h[13]), 1)
    if wantK[i] and wantK[i] ~= buckets then
      return {13, i - 1, buckets, int(h[3]) > 0 and 1 or 0}
    end
    if h[11] ~= 'ACTIVE' then
      return {4, i - 1}
    end
    if now < int(h[9]) then
      return {5, i - 1, int(h[9])}
    end
    if now >= int(h[10]) then
      if h[12] then
        return {6, i - 1}
      end
      redis.call('HSET', key, 'ended', 1)
      return {6, i - 1, announce(outbox, key, key, 'ENDED', now)}
    end
    local remaining = int(h[1])
    if h[14] then -- an envelope pool: its parts are its stock
      pool[i] = true
      remaining = math.min(remaining, redis.call('ZCARD', KEYS[b + 6]))
    end
    if stock[i] and remaining <= 0 then
      return {7, i - 1, remaining}
    end
    -- The channel after the sale-wide answers (every buyer gets those, and
    -- grab-service caches them by promotion), before anything the grab charges.
    local channels = int(h[15])
    if channels ~= 0 and (channel == 0 or math.floor(channels / channel) % 2 == 0) then
      return {15, i - 1}
    end
    if num > int(h[4]) then
      return {11, i - 1}
    end
    if noIP[i] and int(h[3]) > 0 then -- before the rate window, which a resend charges
      return {12, i - 1}
    end
    local rateLimit = int(h[5])
    if pins[i] and rateLimit > 0 then
      local limit = math.floor(rateLimit * factor / 1000)
      if limit < 1 then
        limit = 1
      end
      local window, count, start = int(h[6]), int(h[7]), int(h[8])
      if now - start >= window then
        start, count = now, 0
      end
      if count >= limit then
        return {8, i - 1, start + window - now}
      end
      redis.call('HSET', key, 'winCount', count + 1, 'winStart', start)
    end
    local perPin = int(h[2])
    if pins[i] and perPin > 0 and int(redis.call('HGET', KEYS[b + 2], pin)) + num > perPin then
      return {9, i - 1}
    end
    local perIp = int(h[3])
    if ips[i] and perIp > 0 and int(redis.call('HGET', KEYS[b + 3], ipKey)) + num > perIp then
      return {10, i - 1}
    end
    if stock[i] and remaining < num then
      return {7, i - 1, remaining}
    end
  end

  -- Every item passed: take. remaining >= num was checked, so it never goes below 0.
  local out, soldOut, envelopes, anyPool = {0, 0}, {}, {}, false
  local entry = {s = 'P', h = bodyHash, p = pin, i = ip, d = deadline}
  if ipKey ~= ip then
    entry.j = ipKey
  end
  for i = 1, n do
    local b = 6 * (i - 1)
    local num = nums[i]
    out[i + 2] = -1
    entry.a, entry.e, envelopes[i] = nil, nil, {}
    if stock[i] then
      out[i + 2] = redis.call('HINCRBY', KEYS[b + 1], 'remaining', -num)
      if out[i + 2] == 0 then
        -- a bucket's stock part announces BUCKET_EMPTY, relayed to bucket 0 (state.lua)
        soldOut[#soldOut + 1] = KEYS[b + 1]
      end
      if pool[i] then -- hand out the num parts of lowest index (checked: there are num)
        local popped, members, got, amount = redis.call('ZPOPMIN', KEYS[b + 6], num), {}, {0}, 0
        for j = 1, #popped, 2 do
          members[#members + 1] = popped[j]
          amount = amount + tonumber(string.match(popped[j], ':(%d+)$'))
          got[#got + 1] = tonumber(popped[j + 1])
        end
        got[1] = amount
        redis.call('HINCRBY', KEYS[b + 1], 'envLeft', -amount)
        entry.a, entry.e = amount, table.concat(members, ',')
        envelopes[i], anyPool = got, true
      end
    end
    if pins[i] then
      redis.call('HINCRBY', KEYS[b + 2], pin, num)
    end
    if ips[i] then
      redis.call('HINCRBY', KEYS[b + 3], ipKey, num)
    end
    entry.n = num
    entry.k = letters[i] -- not stored for a part that is all three
    if entry.k == 'spi' then
      entry.k = nil
    end
    redis.call('HSET', KEYS[b + 4], rid, cjson.encode(entry))
    redis.call('ZADD', KEYS[b + 5], deadline, rid)
  end
  if claimKey then
    redis.call('SET', claimKey, claimEntry, 'EX', claimTTL)
  end
  for _, key in ipairs(soldOut) do
    out[#out + 1] = announce(outbox, key, key, 'SOLD_OUT', now)
  end
  if anyPool then
    out[#out + 1] = envelopes
  end
  return out
end

if committed then
  return {take(), committed}
end
return take()
