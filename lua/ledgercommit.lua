-- ledgercommit.lua: prepended (by scripts.go) to commit.lua and q.lua, the two
-- scripts that commit takes: commit.lua on its own, q.lua for the commits that
-- ride a take on the same promotions (README "The commit rides a take").

-- ledgerState is a ledger entry's state letter. An entry q.lua wrote reads without
-- decoding it: cjson writes the field as "s":"P", a sequence no escaped value can
-- hold, so finding it is finding the state.
local function ledgerState(raw)
  if string.find(raw, '"s":"P"', 1, true) then
    return 'P'
  elseif string.find(raw, '"s":"G"', 1, true) then
    return 'G'
  end
  return cjson.decode(raw).s
end

-- commitRequests commits requests, each decided alone: requests[r] is
-- {requestId, items}, items a list of {ledger key, pending key}. It reads every
-- entry before writing any, so an entry in no known state raises an error before
-- any write, and writes each ledger and pending set once, whatever the number of
-- requests on it. It answers a code per request: 0 COMMITTED, 1 NOT_FOUND,
-- 2 RETURNED (commit.lua's).
local function commitRequests(requests)
  local codes, writes, order = {}, {}, {}
  local function writesOf(ledger, pending)
    local w = writes[ledger]
    if not w then
      w = {pending = pending, hset = {}, zrem = {}}
      writes[ledger], order[#order + 1] = w, ledger
    end
    return w
  end
  local found = {}
  for r, req in ipairs(requests) do
    local rid = req[1]
    codes[r], found[r] = 0, {}
    for i, item in ipairs(req[2]) do
      local raw = redis.call('HGET', item[1], rid)
      local s = raw and ledgerState(raw)
      if s and s ~= 'P' and s ~= 'G' and s ~= 'A' and s ~= 'X' and s ~= 'C' and s ~= 'R' then
        error('commit: unknown ledger state')
      end
      if codes[r] == 0 then
        if not raw then
          codes[r] = 1
        elseif s ~= 'P' and s ~= 'G' then
          codes[r] = 2
        end
      end
      found[r][i] = {raw, s}
    end
  end
  for r, req in ipairs(requests) do
    if codes[r] == 0 then
      for i, item in ipairs(req[2]) do
        local w = writesOf(item[1], item[2])
        local raw, s = found[r][i][1], found[r][i][2]
        if s == 'P' then
          local at = string.find(raw, '"s":"P"', 1, true)
          if at then
            raw = string.sub(raw, 1, at + 4) .. 'G' .. string.sub(raw, at + 6)
          else
            local entry = cjson.decode(raw)
            entry.s = 'G'
            raw = cjson.encode(entry)
          end
          w.hset[#w.hset + 1] = req[1]
          w.hset[#w.hset + 1] = raw
        end
        w.zrem[#w.zrem + 1] = req[1]
      end
    end
  end
  for _, ledger in ipairs(order) do
    local w = writes[ledger]
    if #w.hset > 0 then
      redis.call('HSET', ledger, unpack(w.hset))
    end
    redis.call('ZREM', w.pending, unpack(w.zrem))
  end
  return codes
end
