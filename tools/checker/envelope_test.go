package checker

import (
	"testing"
	"time"

	"github.com/flashsale/platform/lua"
)

// pool builds a consistent envelope pool of 4 envelopes worth 10, 20, 30, 40 (a
// budget of 100), which each case then breaks: r1 holds envelopes 0 and 1 (30), r2
// took envelope 2 and returned it, r3 took it again (30); envelope 3 is left.
type pool struct {
	w     *world
	split []int64
}

func newPool() *pool {
	w := newWorld()
	w.promo = Promotion{PromoID: "E", Type: 1, Total: 4, PerPin: 2, PerIP: 3, EnvelopeAmount: 100}
	pl := &pool{w: w, split: []int64{10, 20, 30, 40}}
	w.snap.Redis = map[string]PromoState{w.promo.Key(): {Found: true, Total: 4, Remaining: 4, Pins: map[string]int64{}, IPs: map[string]int64{},
		Ledger: map[string]lua.LedgerEntry{}, EnvAmount: 100, EnvLeft: 100, Pool: map[int]int64{0: 10, 1: 20, 2: 30, 3: 40}}}
	w.snap.Splits = map[string]Split{w.promo.Key(): {Found: true, Amount: 100, Parts: pl.split}}
	pl.grant("r1", "alice", "10.0.0.1", []int{0, 1}, false)
	pl.grant("r2", "bob", "10.0.0.2", []int{2}, true)
	pl.grant("r3", "carol", "10.0.0.3", []int{2}, false)
	w.reqs = append(w.reqs, Request{RequestID: "r4", Pin: "dave", IP: "10.0.0.4", Items: []Item{{PromoID: "E", Type: 1, Num: 2}}, Grab: "SOLD_OUT"})
	return pl
}

// grant records a grab of parts told GRANTED (and RETURNED when returned) and
// everything the stack keeps of it.
func (pl *pool) grant(rid, pin, ip string, parts []int, returned bool) {
	w, key := pl.w, pl.w.promo.Key()
	n := int64(len(parts))
	var amount int64
	for _, idx := range parts {
		amount += pl.split[idx]
	}
	at := time.Unix(1000, 0)
	r := Request{RequestID: rid, Pin: pin, IP: ip, Items: []Item{{PromoID: "E", Type: 1, Num: n, Amount: amount}}, Grab: "GRANTED", Sent: at, Done: at.Add(time.Second)}
	st := w.snap.Redis[key]
	w.offset++
	grab := Row{RequestID: rid, Kind: "GRAB", Pin: pin, IP: ip, Num: n, EventID: "g-" + rid, Offset: w.offset, Amount: amount, Parts: parts}
	w.snap.Record[key] = append(w.snap.Record[key], grab)
	w.snap.Broker[key] = append(w.snap.Broker[key], grab)
	entry := lua.LedgerEntry{State: lua.LedgerCommitted, Num: n, Pin: pin, IP: ip, Amount: amount, Parts: lua.EnvelopeParts(parts, pl.split)}
	if returned {
		r.Cancel, r.Items[0].Returned = "RETURNED", amount
		entry.State = lua.LedgerReturned
		w.offset++
		cancel := Row{RequestID: rid, Kind: "CANCEL", Pin: pin, IP: ip, Num: n, EventID: "c-" + rid, Offset: w.offset, Amount: amount, Parts: parts}
		w.snap.Record[key] = append(w.snap.Record[key], cancel)
		w.snap.Broker[key] = append(w.snap.Broker[key], cancel)
	} else {
		st.Remaining -= n
		st.Pins[pin] += n
		st.IPs[ip] += n
		st.EnvLeft -= amount
		for _, idx := range parts {
			delete(st.Pool, idx)
		}
	}
	st.Ledger[rid] = entry
	w.snap.Redis[key] = st
	w.reqs = append(w.reqs, r)
}

func TestVerifyPoolConsistentPasses(t *testing.T) {
	t.Parallel()
	if rep := newPool().w.verify(); rep.Failed() {
		t.Fatalf("a consistent pool fails:\n%s", rep.String())
	}
}

func TestVerifyPoolFindsEachBreak(t *testing.T) {
	t.Parallel()
	key := Promotion{PromoID: "E", Type: 1}.Key()
	cases := []struct {
		name    string
		breakIt func(pl *pool)
		check   func(r Report) bool
	}{
		{"an envelope held by two grants at once by the record", func(pl *pool) {
			rows := pl.w.snap.Record[key]
			pl.w.snap.Record[key] = append(rows, Row{RequestID: "r9", Kind: "GRAB", Pin: "eve", IP: "10.0.0.9", Num: 1, EventID: "g-r9", Amount: 10, Parts: []int{0}})
		}, func(r Report) bool { return r.EnvelopeFaults >= 1 && r.AmountDrift > 0 }},
		{"a returned envelope missing from the pool (lost)", func(pl *pool) {
			st := pl.w.state()
			delete(st.Pool, 3)
			st.EnvLeft -= 40
			pl.w.set(st)
		}, func(r Report) bool { return r.EnvelopeFaults >= 1 && r.AmountDrift == 40 }},
		{"a held envelope back in the pool", func(pl *pool) {
			st := pl.w.state()
			st.Pool[0] = 10
			st.EnvLeft += 10
			pl.w.set(st)
		}, func(r Report) bool { return r.EnvelopeFaults >= 1 }},
		{"an envelope in the pool at another amount", func(pl *pool) {
			st := pl.w.state()
			st.Pool[3] = 45
			st.EnvLeft += 5
			pl.w.set(st)
		}, func(r Report) bool { return r.AmountDrift >= 5 }},
		{"envLeft off the pool's envelopes", func(pl *pool) {
			st := pl.w.state()
			st.EnvLeft--
			pl.w.set(st)
		}, func(r Report) bool { return r.AmountDrift >= 1 }},
		{"the record's amount off its envelopes' worth", func(pl *pool) {
			pl.w.snap.Record[key][0].Amount = 31
		}, func(r Report) bool { return r.AmountDrift >= 1 }},
		{"a CANCEL giving back other envelopes than its GRAB took", func(pl *pool) {
			for i, r := range pl.w.snap.Record[key] {
				if r.Kind == "CANCEL" {
					pl.w.snap.Record[key][i].Parts = []int{3}
					pl.w.snap.Record[key][i].Amount = 40
				}
			}
		}, func(r Report) bool { return r.EnvelopeFaults >= 1 }},
		{"a CANCEL naming no envelopes: counted once, read as giving back its GRAB's", func(pl *pool) {
			for i, r := range pl.w.snap.Record[key] {
				if r.Kind == "CANCEL" {
					pl.w.snap.Record[key][i].Parts, pl.w.snap.Record[key][i].Amount = nil, 0
				}
			}
		}, func(r Report) bool { return r.EnvelopeFaults == 1 && r.AmountDrift == 30 }},
		{"a GRAB row of 2 units naming 1 envelope", func(pl *pool) {
			pl.w.snap.Record[key][0].Parts = []int{0}
			pl.w.snap.Record[key][0].Amount = 10
		}, func(r Report) bool { return r.EnvelopeFaults >= 1 }},
		{"a client told another amount than the ledger holds", func(pl *pool) {
			pl.w.reqs[0].Items[0].Amount = 29
		}, func(r Report) bool { return r.AmountDrift >= 1 }},
		{"a client told GRANTED without an amount", func(pl *pool) {
			pl.w.reqs[2].Items[0].Amount = 0
		}, func(r Report) bool { return r.EnvelopeFaults >= 1 }},
		{"a client told RETURNED another amount than it was granted", func(pl *pool) {
			pl.w.reqs[1].Items[0].Returned = 20
		}, func(r Report) bool { return r.AmountDrift == 10 }},
		{"the ledger holding other envelopes than the record's GRAB", func(pl *pool) {
			st := pl.w.state()
			e := st.Ledger["r3"]
			e.Parts = lua.EnvelopeParts([]int{3}, pl.split)
			st.Ledger["r3"] = e
			pl.w.set(st)
		}, func(r Report) bool { return r.EnvelopeFaults >= 1 }},
		{"the pool's amount in Redis off the budget", func(pl *pool) {
			st := pl.w.state()
			st.EnvAmount, st.EnvLeft = 110, st.EnvLeft+10
			pl.w.set(st)
		}, func(r Report) bool { return r.AmountDrift >= 10 }},
		{"the record handing out beyond the budget", func(pl *pool) {
			pl.w.snap.Splits[key] = Split{Found: true, Amount: 100, Parts: []int64{10, 20, 30, 140}}
			rows := pl.w.snap.Record[key]
			pl.w.snap.Record[key] = append(rows, Row{RequestID: "r9", Kind: "GRAB", Pin: "eve", IP: "10.0.0.9", Num: 1, EventID: "g-r9", Amount: 140, Parts: []int{3}})
		}, func(r Report) bool { return r.AmountDrift > 0 }},
		{"the split lost from the record", func(pl *pool) {
			delete(pl.w.snap.Splits, key)
		}, func(r Report) bool { return r.AmountDrift >= 100 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			pl := newPool()
			c.breakIt(pl)
			rep := pl.w.verify()
			if !rep.Failed() || !c.check(rep) {
				t.Fatalf("not found as it should be:\n%s", rep.String())
			}
		})
	}
}

// A promotion created as no pool whose Redis hash says it is one is a fault.
func TestVerifyPlainPromotionHoldingAPool(t *testing.T) {
	t.Parallel()
	w := base()
	st := w.state()
	st.EnvAmount = 50
	w.set(st)
	if rep := w.verify(); rep.AmountDrift != 50 {
		t.Fatalf("want amount drift 50, have:\n%s", rep.String())
	}
}
