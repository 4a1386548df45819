package checker

import (
	"slices"

	"github.com/flashsale/platform/lua"
)

// verifyPool checks invariant 7 for envelope pool p: envelopes are handed out once
// and the money agrees to the unit. Its witnesses (split, record, Redis, ledger,
// told) are each a step below; every sum must equal the record's, none may exceed
// the budget.
func verifyPool(rep *Report, p Promotion, st PromoState, split Split, rows []Row, told []*Request) {
	c := &poolCheck{rep: rep, key: p.Key(), budget: p.EnvelopeAmount, total: p.Total, st: st, split: split,
		held: map[int]int{}, grabs: map[string]Row{}}
	c.checkSplit()
	c.checkRecord(rows)
	c.checkRedis()
	c.checkLedger()
	c.checkClients(told)
	c.checkSums()
}

// poolCheck is the check of one envelope pool: what the record says is held, and
// the sum each witness says was handed out.
type poolCheck struct {
	rep                           *Report
	key                           string
	budget, total                 int64
	st                            PromoState
	split                         Split
	held                          map[int]int    // idx -> GRAB rows minus CANCEL rows
	grabs                         map[string]Row // requestId -> its first GRAB row
	recordSum, ledgerSum, toldSum int64
	unresolved                    bool // a client holds no definite answer: its sum is unknown
}

// checkSplit: as created, total parts summing to the budget.
func (c *poolCheck) checkSplit() {
	key, budget, split := c.key, c.budget, c.split
	if !split.Found {
		c.rep.AmountDrift += budget
		c.rep.find("%s: the record keeps no pool (promotion.envelope_amount NULL or no promotion row)", key)
		return
	}
	if split.Amount != budget {
		c.rep.AmountDrift += abs(split.Amount - budget)
		c.rep.find("%s: promotion.envelope_amount %d, created with %d", key, split.Amount, budget)
	}
	if int64(len(split.Parts)) != c.total {
		c.rep.EnvelopeFaults += int(abs(int64(len(split.Parts)) - c.total))
		c.rep.find("%s: promotion_envelope holds %d envelopes, created with total %d", key, len(split.Parts), c.total)
	}
	if sum := sumOf(split.Parts); sum != split.Amount {
		c.rep.AmountDrift += abs(sum - split.Amount)
		c.rep.find("%s: promotion_envelope's envelopes sum to %d, the pool's amount is %d", key, sum, split.Amount)
	}
}

// worth is what envelopes parts are worth by the split; ok is false when one is not
// the split's.
func (c *poolCheck) worth(parts []int) (sum int64, ok bool) {
	for _, idx := range parts {
		if idx < 0 || idx >= len(c.split.Parts) {
			return sum, false
		}
		sum += c.split.Parts[idx]
	}
	return sum, true
}

// checkRecord: each row's parts are num envelopes of the pool worth its amount, a
// CANCEL gives back its GRAB's; per idx GRAB minus CANCEL is 0 or 1.
func (c *poolCheck) checkRecord(rows []Row) {
	for _, r := range rows {
		if _, dup := c.grabs[r.RequestID]; r.Kind == "GRAB" && !dup {
			c.grabs[r.RequestID] = r
		}
	}
	for _, r := range rows {
		c.recordRow(r)
	}
	for idx, n := range c.held {
		if n != 0 && n != 1 {
			c.rep.EnvelopeFaults++
			c.rep.find("%s: envelope %d held by %d grants at once by the record (GRAB rows minus CANCEL rows)", c.key, idx, n)
		}
	}
}

// recordRow checks one flow row and adds it to the record's sum and holdings.
func (c *poolCheck) recordRow(r Row) {
	key := c.key
	if g, ok := c.grabs[r.RequestID]; ok && r.Kind != "GRAB" && len(r.Parts) == 0 && r.Amount == 0 {
		// The rebuild reads a CANCEL naming no envelopes as giving back its GRAB's,
		// but the finance query (grab_flow.amount summed) still counts them: one fault.
		c.rep.EnvelopeFaults += len(g.Parts)
		c.rep.AmountDrift += g.Amount
		c.rep.find("%s %s: CANCEL row names no envelopes (amount and parts NULL); its GRAB took %v (%d), which the record's amount sum still counts", key, r.RequestID, g.Parts, g.Amount)
		r.Parts, r.Amount = g.Parts, g.Amount
	}
	if int64(len(r.Parts)) != r.Num || hasDuplicate(r.Parts) {
		c.rep.EnvelopeFaults += int(max(r.Num, int64(len(r.Parts))))
		c.rep.find("%s %s: %s row of %d units carries envelopes %v", key, r.RequestID, r.Kind, r.Num, r.Parts)
	}
	if sum, ok := c.worth(r.Parts); !ok {
		c.rep.EnvelopeFaults++
		c.rep.find("%s %s: %s row names envelopes %v, not all of the pool's %d", key, r.RequestID, r.Kind, r.Parts, len(c.split.Parts))
	} else if c.split.Found && sum != r.Amount {
		c.rep.AmountDrift += abs(sum - r.Amount)
		c.rep.find("%s %s: %s row's amount %d, its envelopes %v are worth %d", key, r.RequestID, r.Kind, r.Amount, r.Parts, sum)
	}
	step := 1
	if r.Kind != "GRAB" {
		step = -1
		if g, ok := c.grabs[r.RequestID]; ok && (!sameParts(g.Parts, r.Parts) || g.Amount != r.Amount) {
			c.rep.EnvelopeFaults += len(r.Parts)
			c.rep.find("%s %s: CANCEL gave back envelopes %v (%d), its GRAB took %v (%d)", key, r.RequestID, r.Parts, r.Amount, g.Parts, g.Amount)
		}
	}
	c.recordSum += int64(step) * r.Amount
	for _, idx := range r.Parts {
		c.held[idx] += step
	}
}

// checkRedis: the hash's amounts, and the sorted set against the split less the held.
func (c *poolCheck) checkRedis() {
	st, key := c.st, c.key
	if !st.Found {
		return
	}
	if st.EnvAmount != c.budget {
		c.rep.AmountDrift += abs(st.EnvAmount - c.budget)
		c.rep.find("%s: Redis envAmount %d, created with %d", key, st.EnvAmount, c.budget)
	}
	var left int64
	for _, a := range st.Pool {
		left += a
	}
	if left != st.EnvLeft {
		c.rep.AmountDrift += abs(left - st.EnvLeft)
		c.rep.find("%s: envLeft %d, but the envelopes left in the pool sum to %d", key, st.EnvLeft, left)
	}
	if int64(len(st.Pool)) != st.Remaining {
		c.rep.EnvelopeFaults += int(abs(int64(len(st.Pool)) - st.Remaining))
		c.rep.find("%s: %d envelopes left in the pool, remaining %d", key, len(st.Pool), st.Remaining)
	}
	c.checkPoolLeft()
}

// checkPoolLeft: every envelope is either in the pool, worth the split's, or held.
func (c *poolCheck) checkPoolLeft() {
	key, parts := c.key, c.split.Parts
	for idx, a := range c.st.Pool {
		switch {
		case idx >= len(parts):
			c.rep.EnvelopeFaults++
			c.rep.find("%s: envelope %d in the pool is not the split's (%d envelopes)", key, idx, len(parts))
		case c.held[idx] == 1:
			c.rep.EnvelopeFaults++
			c.rep.find("%s: envelope %d is in the pool and held by a grant at once", key, idx)
		case a != parts[idx]:
			c.rep.AmountDrift += abs(a - parts[idx])
			c.rep.find("%s: envelope %d is in the pool worth %d, the split says %d", key, idx, a, parts[idx])
		}
	}
	for idx := range parts {
		if _, in := c.st.Pool[idx]; !in && c.held[idx] != 1 {
			c.rep.EnvelopeFaults++
			c.rep.find("%s: envelope %d is neither in the pool nor held by a grant (lost)", key, idx)
		}
	}
}

// checkLedger: the committed entries hold each envelope once, and the record's GRAB
// of each the same envelopes.
func (c *poolCheck) checkLedger() {
	key := c.key
	holder := map[int]string{}
	for rid, e := range c.st.Ledger {
		if e.State != lua.LedgerCommitted {
			continue
		}
		env, err := e.Envelope()
		if err != nil || int64(len(env.Parts)) != e.Num {
			c.rep.EnvelopeFaults += int(e.Num)
			c.rep.find("%s %s: ledger entry of %d units holds envelopes %q (err %v)", key, rid, e.Num, e.Parts, err)
			continue
		}
		c.ledgerSum += env.Amount
		for _, idx := range env.Parts {
			if other, dup := holder[idx]; dup {
				c.rep.EnvelopeFaults++
				c.rep.find("%s: envelope %d held by %s and %s at once by the ledger", key, idx, other, rid)
			}
			holder[idx] = rid
		}
		if g, ok := c.grabs[rid]; ok && (!sameParts(g.Parts, env.Parts) || g.Amount != env.Amount) {
			c.rep.AmountDrift += abs(g.Amount - env.Amount)
			c.rep.EnvelopeFaults += len(env.Parts)
			c.rep.find("%s %s: the ledger holds envelopes %v (%d), the record's GRAB %v (%d)", key, rid, env.Parts, env.Amount, g.Parts, g.Amount)
		}
	}
}

// checkClients: what the clients hold by the amounts they were told.
func (c *poolCheck) checkClients(told []*Request) {
	key := c.key
	for _, r := range told {
		it := r.item(key)
		h, known := r.Held()
		if !known {
			c.unresolved = true
			continue
		}
		if r.Grab == "GRANTED" && it.Amount <= 0 {
			c.rep.EnvelopeFaults += int(it.Num)
			c.rep.find("%s %s: client told GRANTED %d envelopes without their amount", key, r.RequestID, it.Num)
		}
		// A RETURNED answer lists what this cancel gave back: an item an earlier
		// attempt returned is not in it (Returned 0; an envelope is worth at least 1).
		if r.Cancel == "RETURNED" && it.Returned != 0 && it.Returned != it.Amount {
			c.rep.AmountDrift += abs(it.Returned - it.Amount)
			c.rep.find("%s %s: client told RETURNED %d, its GRANTED said %d", key, r.RequestID, it.Returned, it.Amount)
		}
		if !h {
			continue
		}
		c.toldSum += it.Amount
		if e, ok := c.st.Ledger[r.RequestID]; ok && e.State == lua.LedgerCommitted && e.Amount != it.Amount {
			c.rep.AmountDrift += abs(e.Amount - it.Amount)
			c.rep.find("%s %s: the ledger holds %d, the client was told %d", key, r.RequestID, e.Amount, it.Amount)
		}
	}
}

// checkSums: every witness's sum equal to the record's, never above the budget.
func (c *poolCheck) checkSums() {
	witnesses := []struct {
		name string
		sum  int64
		has  bool
	}{{"the record", c.recordSum, true}, {"Redis (envAmount - envLeft)", c.st.EnvAmount - c.st.EnvLeft, c.st.Found},
		{"the ledger", c.ledgerSum, c.st.Found}, {"the clients", c.toldSum, !c.unresolved}}
	var over int64
	for _, s := range witnesses {
		if !s.has {
			continue
		}
		if s.sum > c.budget {
			over = max(over, s.sum-c.budget)
			c.rep.find("%s: %s hands out %d of the budget %d", c.key, s.name, s.sum, c.budget)
		}
		if s.sum != c.recordSum {
			c.rep.AmountDrift += abs(s.sum - c.recordSum)
			c.rep.find("%s: %s hands out %d, the record %d", c.key, s.name, s.sum, c.recordSum)
		}
	}
	c.rep.AmountDrift += over
}

// item is the request's item of promotion key.
func (r *Request) item(key string) Item {
	for _, it := range r.Items {
		if it.Key() == key {
			return it
		}
	}
	return Item{}
}

func sumOf(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

func sameParts(a, b []int) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func hasDuplicate(parts []int) bool {
	seen := map[int]bool{}
	for _, p := range parts {
		if seen[p] {
			return true
		}
		seen[p] = true
	}
	return false
}
