package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/lua"
)

// world builds a consistent snapshot from told requests, which each case then breaks.
type world struct {
	promo  Promotion
	reqs   []Request
	snap   Snapshot
	offset int64
}

func newWorld() *world {
	p := Promotion{PromoID: "P", Type: 1, Total: 10, PerPin: 2, PerIP: 3}
	w := &world{promo: p, snap: Snapshot{
		Redis:  map[string]PromoState{p.Key(): {Found: true, Total: 10, Remaining: 10, Pins: map[string]int64{}, IPs: map[string]int64{}, Ledger: map[string]lua.LedgerEntry{}}},
		Record: map[string][]Row{},
		Broker: map[string][]Row{},
	}}
	return w
}

// grant records a request told GRANTED and everything the stack keeps of it.
func (w *world) grant(rid, pin, ip string, n int64, returned bool) {
	key := w.promo.Key()
	at := time.Unix(1000, 0)
	r := Request{RequestID: rid, Pin: pin, IP: ip, Items: []Item{{PromoID: "P", Type: 1, Num: n}}, Grab: "GRANTED", Sent: at, Done: at.Add(time.Second)}
	st := w.snap.Redis[key]
	w.offset++
	grab := Row{RequestID: rid, Kind: "GRAB", Pin: pin, IP: ip, Num: n, EventID: "g-" + rid, Offset: w.offset}
	w.snap.Record[key] = append(w.snap.Record[key], grab)
	w.snap.Broker[key] = append(w.snap.Broker[key], grab)
	if returned {
		r.Cancel = "RETURNED"
		st.Ledger[rid] = lua.LedgerEntry{State: lua.LedgerReturned, Num: n, Pin: pin, IP: ip}
		w.offset++
		cancel := Row{RequestID: rid, Kind: "CANCEL", Pin: pin, IP: ip, Num: n, EventID: "c-" + rid, Offset: w.offset}
		w.snap.Record[key] = append(w.snap.Record[key], cancel)
		w.snap.Broker[key] = append(w.snap.Broker[key], cancel)
	} else {
		st.Ledger[rid] = lua.LedgerEntry{State: lua.LedgerCommitted, Num: n, Pin: pin, IP: ip}
		st.Remaining -= n
		st.Pins[pin] += n
		st.IPs[promo.IPCounterKey(ip)] += n // as q.lua counts it
	}
	w.snap.Redis[key] = st
	w.reqs = append(w.reqs, r)
}

func (w *world) state() *PromoState {
	st := w.snap.Redis[w.promo.Key()]
	return &st
}

func (w *world) set(st *PromoState) { w.snap.Redis[w.promo.Key()] = *st }

func (w *world) verify() Report {
	return Verify([]Promotion{w.promo}, w.reqs, w.snap)
}

func base() *world {
	w := newWorld()
	w.grant("r1", "alice", "10.0.0.1", 2, false)
	w.grant("r2", "bob", "10.0.0.1", 1, false)
	w.grant("r3", "carol", "10.0.0.2", 1, true)
	w.reqs = append(w.reqs, Request{RequestID: "r4", Pin: "dave", IP: "10.0.0.3", Items: []Item{{PromoID: "P", Type: 1, Num: 1}}, Grab: "SOLD_OUT"})
	return w
}

func TestVerifyConsistentWorldPasses(t *testing.T) {
	t.Parallel()
	if rep := base().verify(); rep.Failed() {
		t.Fatalf("a consistent world fails:\n%s", rep.String())
	}
}

// Two addresses of one IPv6 prefix are one buyer to the per-ip limit: the shard
// counts them under one key, and the checker must sum the witnesses the same way.
func TestVerifyCountsAnIPv6BuyerByItsPrefix(t *testing.T) {
	t.Parallel()
	w := newWorld()
	w.grant("r1", "alice", "2001:db8:1:2::a", 1, false)
	w.grant("r2", "bob", "2001:db8:1:2::b", 2, false)
	if rep := w.verify(); rep.Failed() {
		t.Fatalf("two grabs of one /64 within the limit fail:\n%s", rep.String())
	}
	if got := w.state().IPs[promo.IPCounterKey("2001:db8:1:2::a")]; got != 3 {
		t.Fatalf("the shard's count of the /64 is %d, want 3", got)
	}
	w.grant("r3", "carol", "2001:db8:1:2::c", 1, false)
	rep := w.verify()
	if !strings.Contains(strings.Join(rep.Findings, "\n"), "ip 2001:db8:1:2::/64 holds 4") {
		t.Fatalf("a fourth unit from the same /64 (limit 3) is not found:\n%s", rep.String())
	}
}

func TestVerifyFindsEachBreak(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		breakIt func(w *world)
		check   func(r Report) bool
	}{
		{"oversold: remaining below zero", func(w *world) {
			st := w.state()
			st.Remaining = -1
			w.set(st)
		}, func(r Report) bool { return r.Oversold > 0 }},
		{"oversold: Redis offers more than the ledger leaves", func(w *world) {
			st := w.state()
			st.Remaining += 2
			w.set(st)
		}, func(r Report) bool { return r.Oversold == 2 }},
		{"leaked: stock gone without a holder", func(w *world) {
			st := w.state()
			st.Remaining--
			w.set(st)
		}, func(r Report) bool { return r.Leaked == 1 }},
		{"leaked: Redis holds a grant no client was told", func(w *world) {
			w.reqs[1].Grab = "UNAVAILABLE"
		}, func(r Report) bool { return r.Leaked == 1 && r.Lost == 0 }},
		{"leaked: a take still open", func(w *world) {
			st := w.state()
			st.Ledger["r9"] = lua.LedgerEntry{State: lua.LedgerPending, Num: 1, Pin: "x", IP: "y"}
			w.set(st)
		}, func(r Report) bool { return r.Leaked >= 1 }},
		{"lost: a client holds what Redis returned", func(w *world) {
			st := w.state()
			st.Ledger["r1"] = lua.LedgerEntry{State: lua.LedgerReturned, Num: 2, Pin: "alice", IP: "10.0.0.1"}
			w.set(st)
		}, func(r Report) bool { return r.Lost == 2 }},
		{"lost: a cancel answered RETURNED that Redis did not do", func(w *world) {
			w.reqs[0].Cancel = "RETURNED"
		}, func(r Report) bool { return r.Leaked == 2 }},
		{"limit breached by a pin", func(w *world) {
			st := w.state()
			st.Pins["alice"] = 3
			w.set(st)
		}, func(r Report) bool { return r.LimitBreached > 0 }},
		{"limit breached by an ip, by the record", func(w *world) {
			w.snap.Record[w.promo.Key()] = append(w.snap.Record[w.promo.Key()], Row{RequestID: "r8", Kind: "GRAB", Pin: "eve", IP: "10.0.0.1", Num: 1})
		}, func(r Report) bool { return r.LimitBreached > 0 && r.Drift > 0 }},
		{"record drift: a GRAB missing from MySQL", func(w *world) {
			w.snap.Record[w.promo.Key()] = w.snap.Record[w.promo.Key()][1:]
		}, func(r Report) bool { return r.Drift == 2 }},
		{"record drift: a CANCEL missing from MySQL", func(w *world) {
			rows := w.snap.Record[w.promo.Key()]
			w.snap.Record[w.promo.Key()] = rows[:len(rows)-1]
		}, func(r Report) bool { return r.Drift == 1 }},
		{"record drift: a CANCEL the sink skipped although its GRAB came first", func(w *world) {
			key := w.promo.Key()
			w.offset++
			w.snap.Broker[key] = append(w.snap.Broker[key], Row{RequestID: "r1", Kind: "CANCEL", Pin: "alice", IP: "10.0.0.1", Num: 2, EventID: "c-r1", Offset: w.offset})
		}, func(r Report) bool { return r.Drift == 2 }},
		{"record drift: an event the broker holds that MySQL lacks", func(w *world) {
			w.snap.Broker[w.promo.Key()] = append(w.snap.Broker[w.promo.Key()], Row{RequestID: "r7", Kind: "GRAB", Pin: "x", IP: "y", Num: 1})
		}, func(r Report) bool { return r.Drift == 1 }},
		{"unresolved: no definite answer", func(w *world) {
			w.reqs[3].Grab = Unknown
		}, func(r Report) bool { return r.Unresolved == 1 }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := base()
			c.breakIt(w)
			rep := w.verify()
			if !rep.Failed() || !c.check(rep) {
				t.Fatalf("not found as it should be:\n%s", rep.String())
			}
		})
	}
}

// The record lacking an acknowledged event is drift, and a shard rebuilt from such a
// record loses the client's grant: both are failures, whatever the broker did. (The
// local broker keeps its log across restarts, as Kafka does; the checker once
// excused what an in-memory broker dropped, and now excuses nothing.)
func TestVerifyFailsWhatTheRecordLacks(t *testing.T) {
	t.Parallel()
	w := base()
	w.snap.Record[w.promo.Key()] = w.snap.Record[w.promo.Key()][1:] // r1's GRAB missing
	w.snap.Broker = nil
	if rep := w.verify(); !rep.Failed() || rep.Drift != 2 {
		t.Fatalf("a GRAB the record lacks is drift, have:\n%s", rep.String())
	}
	// A CANCEL the record lacks leaves it holding a grant Redis resold: the record
	// oversells.
	w = base()
	w.grant("r6", "frank", "10.0.0.6", 2, false) // the stock r3 returned is sold again: 10 of 10
	w.grant("r7", "gina", "10.0.0.7", 2, false)
	w.grant("r8", "hank", "10.0.0.8", 2, false)
	w.grant("r9", "ivy", "10.0.0.9", 1, false)
	rows := w.snap.Record[w.promo.Key()]
	for i, r := range rows {
		if r.RequestID == "r3" && r.Kind == "CANCEL" {
			w.snap.Record[w.promo.Key()] = append(rows[:i:i], rows[i+1:]...)
		}
	}
	w.snap.Broker = nil
	if rep := w.verify(); !rep.Failed() || rep.Drift == 0 || rep.Oversold == 0 {
		t.Fatalf("a CANCEL the record lacks is drift and an oversell by the record, have:\n%s", rep.String())
	}
	// Rebuilt from the record that lacks r1's GRAB, Redis agrees with the record, not
	// with the client.
	w = base()
	w.snap.Record[w.promo.Key()] = w.snap.Record[w.promo.Key()][1:]
	w.snap.Broker = nil
	st := w.state()
	delete(st.Ledger, "r1")
	delete(st.Pins, "alice")
	st.IPs["10.0.0.1"] -= 2
	st.Remaining += 2
	w.set(st)
	if rep := w.verify(); !rep.Failed() || rep.Lost != 2 {
		t.Fatalf("a grant lost with the record's event is a loss, have:\n%s", rep.String())
	}
}

// Found by the Redis drill: a take rolled back (its CANCEL skipped by the sink, as
// its GRAB was never published), then lost with its shard, is granted afresh under
// the same requestId; the topic holds CANCEL then GRAB, the record the GRAB alone.
func TestVerifyAcceptsARolledBackRequestGrantedAfresh(t *testing.T) {
	t.Parallel()
	w := base()
	key := w.promo.Key()
	rollback := Row{RequestID: "r5", Kind: "CANCEL", Pin: "erin", IP: "10.0.0.5", Num: 1, EventID: "c-r5", Offset: 0}
	w.snap.Broker[key] = append([]Row{rollback}, w.snap.Broker[key]...)
	w.grant("r5", "erin", "10.0.0.5", 1, false)
	if rep := w.verify(); rep.Failed() {
		t.Fatalf("a legitimately skipped CANCEL is reported:\n%s", rep.String())
	}
}

// A bucketed promotion reads as one: totals and counters add up, and of a
// request's entries on several buckets the one holding its stock stands for it.
func TestMergeBuckets(t *testing.T) {
	b0 := PromoState{Found: true, Total: 5, Remaining: 4, Pins: map[string]int64{"p": 1}, IPs: map[string]int64{},
		Ledger: map[string]lua.LedgerEntry{"r": {State: lua.LedgerCommitted, Num: 1, Part: "p"}}, Open: 1}
	b1 := PromoState{Found: true, Total: 5, Remaining: 5, Pins: map[string]int64{}, IPs: map[string]int64{"ip": 1},
		Ledger: map[string]lua.LedgerEntry{"r": {State: lua.LedgerCommitted, Num: 1, Part: "si"}}}
	st := merge(merge(PromoState{}, b0, true), b1, false)
	if !st.Found || st.Total != 10 || st.Remaining != 9 || st.Pins["p"] != 1 || st.IPs["ip"] != 1 || st.Open != 1 {
		t.Fatalf("merged %+v", st)
	}
	if e := st.Ledger["r"]; e.Part != "si" || len(st.Ledger) != 1 {
		t.Fatalf("ledger %+v, want the stock part's entry alone", st.Ledger)
	}
}
