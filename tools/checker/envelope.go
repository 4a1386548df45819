package checker

import (
	"slices"

	"github.com/flashsale/platform/lua"
)

// verifyPool checks invariant 7 for envelope pool p: envelopes are handed out once
// and the money agrees to the unit. The witnesses:
//
//	split    promotion.envelope_amount and promotion_envelope: the pool's parts by idx
//	record   grab_flow.amount and .parts: per idx, GRAB rows minus CANCEL rows is 0
//	         (in the pool) or 1 (held); the GRAB amounts minus the CANCEL amounts
//	         are what the pool handed out
//	redis    envAmount - envLeft; the sorted set is the split less the held parts;
//	         the ledger's committed entries hold those parts
//	told     the clients' GRANTED amounts of the grants they still hold (a RETURNED
//	         answer gives back the amount its GRANTED carried)
//
// Every sum must equal the record's, none may exceed the budget.
func verifyPool(rep *Report, p Promotion, st PromoState, split Split, rows []Row, told []*Request) {
	key := p.Key()
	budget := p.EnvelopeAmount

	// The split: as created, Total parts summing to the budget.
	if !split.Found {
		rep.AmountDrift += budget
		rep.find("%s: the record keeps no pool (promotion.envelope_amount NULL or no promotion row)", key)
	} else {
		if split.Amount != budget {
			rep.AmountDrift += abs(split.Amount - budget)
			rep.find("%s: promotion.envelope_amount %d, created with %d", key, split.Amount, budget)
		}
		if int64(len(split.Parts)) != p.Total {
			rep.EnvelopeFaults += int(abs(int64(len(split.Parts)) - p.Total))
			rep.find("%s: promotion_envelope holds %d envelopes, created with total %d", key, len(split.Parts), p.Total)
		}
		if sum := sumOf(split.Parts); sum != split.Amount {
			rep.AmountDrift += abs(sum - split.Amount)
			rep.find("%s: promotion_envelope's envelopes sum to %d, the pool's amount is %d", key, sum, split.Amount)
		}
	}
	worth := func(parts []int) (sum int64, ok bool) {
		for _, idx := range parts {
			if idx < 0 || idx >= len(split.Parts) {
				return sum, false
			}
			sum += split.Parts[idx]
		}
		return sum, true
	}

	// The record: each row's parts are num envelopes of the pool worth its amount,
	// a CANCEL gives back its GRAB's; per idx GRAB minus CANCEL is 0 or 1.
	held := map[int]int{} // idx -> GRAB rows minus CANCEL rows
	grabs := map[string]Row{}
	for _, r := range rows {
		if _, dup := grabs[r.RequestID]; r.Kind == "GRAB" && !dup {
			grabs[r.RequestID] = r
		}
	}
	var recordSum int64
	for _, r := range rows {
		if g, ok := grabs[r.RequestID]; ok && r.Kind != "GRAB" && len(r.Parts) == 0 && r.Amount == 0 {
			// A CANCEL naming no envelopes: the rebuild reads it as giving back its
			// GRAB's, but the contract's finance query (grab_flow.amount summed) still
			// counts them handed out. One fault; read on as the rebuild does.
			rep.EnvelopeFaults += len(g.Parts)
			rep.AmountDrift += g.Amount
			rep.find("%s %s: CANCEL row names no envelopes (amount and parts NULL); its GRAB took %v (%d), which the record's amount sum still counts", key, r.RequestID, g.Parts, g.Amount)
			r.Parts, r.Amount = g.Parts, g.Amount
		}
		if int64(len(r.Parts)) != r.Num || hasDuplicate(r.Parts) {
			rep.EnvelopeFaults += int(max(r.Num, int64(len(r.Parts))))
			rep.find("%s %s: %s row of %d units carries envelopes %v", key, r.RequestID, r.Kind, r.Num, r.Parts)
		}
		if sum, ok := worth(r.Parts); !ok {
			rep.EnvelopeFaults++
			rep.find("%s %s: %s row names envelopes %v, not all of the pool's %d", key, r.RequestID, r.Kind, r.Parts, len(split.Parts))
		} else if split.Found && sum != r.Amount {
			rep.AmountDrift += abs(sum - r.Amount)
			rep.find("%s %s: %s row's amount %d, its envelopes %v are worth %d", key, r.RequestID, r.Kind, r.Amount, r.Parts, sum)
		}
		step := 1
		if r.Kind != "GRAB" {
			step = -1
			if g, ok := grabs[r.RequestID]; ok && (!sameParts(g.Parts, r.Parts) || g.Amount != r.Amount) {
				rep.EnvelopeFaults += len(r.Parts)
				rep.find("%s %s: CANCEL gave back envelopes %v (%d), its GRAB took %v (%d)", key, r.RequestID, r.Parts, r.Amount, g.Parts, g.Amount)
			}
		}
		recordSum += int64(step) * r.Amount
		for _, idx := range r.Parts {
			held[idx] += step
		}
	}
	for idx, n := range held {
		if n != 0 && n != 1 {
			rep.EnvelopeFaults++
			rep.find("%s: envelope %d held by %d grants at once by the record (GRAB rows minus CANCEL rows)", key, idx, n)
		}
	}

	// Redis: the hash's amounts, the sorted set against the split less the held.
	if st.Found {
		if st.EnvAmount != budget {
			rep.AmountDrift += abs(st.EnvAmount - budget)
			rep.find("%s: Redis envAmount %d, created with %d", key, st.EnvAmount, budget)
		}
		var left int64
		for _, a := range st.Pool {
			left += a
		}
		if left != st.EnvLeft {
			rep.AmountDrift += abs(left - st.EnvLeft)
			rep.find("%s: envLeft %d, but the envelopes left in the pool sum to %d", key, st.EnvLeft, left)
		}
		if int64(len(st.Pool)) != st.Remaining {
			rep.EnvelopeFaults += int(abs(int64(len(st.Pool)) - st.Remaining))
			rep.find("%s: %d envelopes left in the pool, remaining %d", key, len(st.Pool), st.Remaining)
		}
		for idx, a := range st.Pool {
			switch {
			case idx >= len(split.Parts):
				rep.EnvelopeFaults++
				rep.find("%s: envelope %d in the pool is not the split's (%d envelopes)", key, idx, len(split.Parts))
			case held[idx] == 1:
				rep.EnvelopeFaults++
				rep.find("%s: envelope %d is in the pool and held by a grant at once", key, idx)
			case a != split.Parts[idx]:
				rep.AmountDrift += abs(a - split.Parts[idx])
				rep.find("%s: envelope %d is in the pool worth %d, the split says %d", key, idx, a, split.Parts[idx])
			}
		}
		for idx := range split.Parts {
			if _, in := st.Pool[idx]; !in && held[idx] != 1 {
				rep.EnvelopeFaults++
				rep.find("%s: envelope %d is neither in the pool nor held by a grant (lost)", key, idx)
			}
		}
	}

	// The ledger: its committed entries hold each envelope once, and the record's
	// GRAB of each the same envelopes.
	var ledgerSum int64
	ledgerHolder := map[int]string{}
	for rid, e := range st.Ledger {
		if e.State != lua.LedgerCommitted {
			continue
		}
		env, err := e.Envelope()
		if err != nil || int64(len(env.Parts)) != e.Num {
			rep.EnvelopeFaults += int(e.Num)
			rep.find("%s %s: ledger entry of %d units holds envelopes %q (err %v)", key, rid, e.Num, e.Parts, err)
			continue
		}
		ledgerSum += env.Amount
		for _, idx := range env.Parts {
			if other, dup := ledgerHolder[idx]; dup {
				rep.EnvelopeFaults++
				rep.find("%s: envelope %d held by %s and %s at once by the ledger", key, idx, other, rid)
			}
			ledgerHolder[idx] = rid
		}
		if g, ok := grabs[rid]; ok && (!sameParts(g.Parts, env.Parts) || g.Amount != env.Amount) {
			rep.AmountDrift += abs(g.Amount - env.Amount)
			rep.EnvelopeFaults += len(env.Parts)
			rep.find("%s %s: the ledger holds envelopes %v (%d), the record's GRAB %v (%d)", key, rid, env.Parts, env.Amount, g.Parts, g.Amount)
		}
	}

	// The clients: what they hold by the amounts they were told.
	var toldSum int64
	resolved := true
	for _, r := range told {
		it := r.item(key)
		h, known := r.Held()
		if !known {
			resolved = false
			continue
		}
		if r.Grab == "GRANTED" && it.Amount <= 0 {
			rep.EnvelopeFaults += int(it.Num)
			rep.find("%s %s: client told GRANTED %d envelopes without their amount", key, r.RequestID, it.Num)
		}
		// A RETURNED answer lists what this cancel gave back: an item an earlier
		// attempt returned is not in it (Returned 0; an envelope is worth at least 1).
		if r.Cancel == "RETURNED" && it.Returned != 0 && it.Returned != it.Amount {
			rep.AmountDrift += abs(it.Returned - it.Amount)
			rep.find("%s %s: client told RETURNED %d, its GRANTED said %d", key, r.RequestID, it.Returned, it.Amount)
		}
		if !h {
			continue
		}
		toldSum += it.Amount
		if e, ok := st.Ledger[r.RequestID]; ok && e.State == lua.LedgerCommitted && e.Amount != it.Amount {
			rep.AmountDrift += abs(e.Amount - it.Amount)
			rep.find("%s %s: the ledger holds %d, the client was told %d", key, r.RequestID, e.Amount, it.Amount)
		}
	}

	// The sums: equal to the record's, never above the budget.
	redisSum := st.EnvAmount - st.EnvLeft
	sums := []struct {
		name string
		sum  int64
		has  bool
	}{{"the record", recordSum, true}, {"Redis (envAmount - envLeft)", redisSum, st.Found}, {"the ledger", ledgerSum, st.Found}, {"the clients", toldSum, resolved}}
	var over int64
	for _, s := range sums {
		if !s.has {
			continue
		}
		if s.sum > budget {
			over = max(over, s.sum-budget)
			rep.find("%s: %s hands out %d of the budget %d", key, s.name, s.sum, budget)
		}
		if s.sum != recordSum {
			rep.AmountDrift += abs(s.sum - recordSum)
			rep.find("%s: %s hands out %d, the record %d", key, s.name, s.sum, recordSum)
		}
	}
	rep.AmountDrift += over
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
