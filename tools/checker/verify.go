package checker

import (
	"github.com/flashsale/platform/lua"
)

// PromoState is one promotion as Redis holds it.
type PromoState struct {
	Found            bool
	Total, Remaining int64
	Pins, IPs        map[string]int64
	Ledger           map[string]lua.LedgerEntry // requestId -> entry
	Open             int64                      // entries in the pending set
	// EnvAmount and EnvLeft are an envelope pool's hash fields (the budget, the sum
	// of the envelopes left), Pool its sorted set of envelopes left, idx -> amount;
	// zero and empty for a promotion that is no pool.
	EnvAmount, EnvLeft int64
	Pool               map[int]int64
}

// Row is one flow event of one promotion: a grab_flow row, or an event on the topic.
type Row struct {
	RequestID, Kind, Pin, IP string
	Num                      int64
	EventID                  string
	// Amount and Parts: of an envelope pool's item, the envelopes (idx) the GRAB
	// took or the CANCEL gave back, and their sum (grab_flow.amount, .parts).
	Amount int64
	Parts  []int
	// Offset orders a request's events on the topic (all of a request's events
	// share a partition); unused for grab_flow rows.
	Offset int64
}

// Snapshot is everything read from the stack, by promotion key.
type Snapshot struct {
	Redis  map[string]PromoState
	Record map[string][]Row
	// Broker holds the events the Kafka topic still has; nil when it was not read.
	Broker map[string][]Row
	// Splits are the envelope pools' splits as the record keeps them, by
	// promotion key (pools only).
	Splits map[string]Split
}

// Split is an envelope pool as MySQL keeps it: promotion.envelope_amount and
// promotion_envelope's amounts, by idx (the order they are handed out in).
type Split struct {
	Found  bool // the promotion row exists and is a pool
	Amount int64
	Parts  []int64
}

// flows indexes one promotion's flow rows by request (the first of each kind) and
// its GRABs by event id.
type flows struct {
	grab, cancel map[string]Row
	grabs        map[string]Row
}

func index(rows []Row) flows {
	f := flows{grab: map[string]Row{}, cancel: map[string]Row{}, grabs: map[string]Row{}}
	for _, r := range rows {
		if r.Kind == "GRAB" {
			f.grabs[r.EventID] = r
			if _, dup := f.grab[r.RequestID]; !dup {
				f.grab[r.RequestID] = r
			}
		} else if _, dup := f.cancel[r.RequestID]; !dup {
			f.cancel[r.RequestID] = r
		}
	}
	return f
}

func (f flows) held(rid string) bool {
	_, g := f.grab[rid]
	_, c := f.cancel[rid]
	return g && !c
}

// Verify reconciles told answers with a snapshot. It is pure, so the checker's own
// rules have table tests.
func Verify(promos []Promotion, reqs []Request, snap Snapshot) Report {
	rep := Report{Promotions: len(promos), Requests: len(reqs)}
	byID := make(map[string]*Request, len(reqs))
	toldOn := map[string][]*Request{} // promotion key -> requests naming it
	unresolved := map[string]bool{}
	for i := range reqs {
		r := &reqs[i]
		byID[r.RequestID] = r
		for _, it := range r.Items {
			toldOn[it.Key()] = append(toldOn[it.Key()], r)
		}
		if _, known := r.Held(); !known {
			unresolved[r.RequestID] = true
			rep.find("request %s: no definite answer (grab %s, cancel %q)", r.RequestID, r.Grab, r.Cancel)
		}
	}
	rep.Unresolved = len(unresolved)
	breached := map[string]bool{}

	for _, p := range promos {
		key := p.Key()
		st := snap.Redis[key]
		rec := index(snap.Record[key])
		if !st.Found {
			rep.find("%s: no promotion hash in Redis", key)
		}

		// Witness sums: held units in all and per pin / ip.
		type sums struct {
			units     int64
			pins, ips map[string]int64
		}
		newSums := func() sums { return sums{pins: map[string]int64{}, ips: map[string]int64{}} }
		told, ledger, record := newSums(), newSums(), newSums()
		add := func(s *sums, pin, ip string, n int64) {
			s.units += n
			s.pins[pin] += n
			s.ips[ip] += n
		}

		rids := map[string]bool{}
		for rid := range st.Ledger {
			rids[rid] = true
		}
		for rid := range rec.grab {
			rids[rid] = true
		}
		for rid := range rec.cancel {
			rids[rid] = true
		}
		toldNum := map[string]int64{}
		for _, r := range toldOn[key] {
			rids[r.RequestID] = true
			for _, it := range r.Items {
				if it.Key() == key {
					toldNum[r.RequestID] = it.Num
				}
			}
		}

		drifted := map[string]bool{} // requests whose record disagrees, counted once
		for rid := range rids {
			r := byID[rid]
			toldHeld, known := false, true
			if r != nil {
				toldHeld, known = r.Held()
			}
			e, inLedger := st.Ledger[rid]
			ledgerHeld := inLedger && e.State == lua.LedgerCommitted
			open := inLedger && (e.State == lua.LedgerPending || e.State == lua.LedgerAborted || e.State == lua.LedgerCancelled)
			recHeld := rec.held(rid)
			n := toldNum[rid]
			if n == 0 {
				n = e.Num
			}
			if n == 0 {
				n = rec.grab[rid].Num
			}

			if toldHeld {
				add(&told, r.Pin, r.IP, n)
			}
			if ledgerHeld {
				add(&ledger, e.Pin, e.IP, e.Num)
				if r != nil && toldHeld && e.Num != n {
					rep.Drift += abs(e.Num - n)
					rep.find("%s %s: ledger holds %d, client was granted %d", key, rid, e.Num, n)
				}
			}
			if recHeld {
				g := rec.grab[rid]
				add(&record, g.Pin, g.IP, g.Num)
			}

			switch {
			case open:
				rep.Leaked += e.Num
				rep.find("%s %s: take still open (ledger %s) after the stack settled", key, rid, e.State)
			case !known:
				// counted once as unresolved above
			case toldHeld && !ledgerHeld:
				rep.Lost += n
				rep.find("%s %s: client holds %d (grab %s, cancel %q) but the Redis ledger says %q", key, rid, n, r.Grab, r.Cancel, e.State)
			case !toldHeld && ledgerHeld:
				rep.Leaked += e.Num
				grab, cancel := "never sent", ""
				if r != nil {
					grab, cancel = r.Grab, r.Cancel
				}
				rep.find("%s %s: Redis holds %d for it but the client does not (grab %s, cancel %q)", key, rid, e.Num, grab, cancel)
			}
			if !open && ledgerHeld != recHeld {
				drifted[rid] = true
				rep.Drift += n
				rep.find("%s %s: Redis ledger %q (held %v) but the record holds it %v", key, rid, e.State, ledgerHeld, recHeld)
			}
		}

		// Counters against the ledger: remaining, per pin, per ip.
		if st.Found {
			if want := p.Total - ledger.units; st.Remaining != want {
				if st.Remaining > want {
					rep.Oversold += st.Remaining - want
				} else {
					rep.Leaked += want - st.Remaining
				}
				rep.find("%s: remaining %d, but total %d minus the ledger's %d granted is %d", key, st.Remaining, p.Total, ledger.units, want)
			}
			for who, kind := range map[*map[string]int64]string{&st.Pins: "pin", &st.IPs: "ip"} {
				want := ledger.pins
				if kind == "ip" {
					want = ledger.ips
				}
				seen := map[string]bool{}
				for k, have := range *who {
					seen[k] = true
					if d := have - want[k]; d > 0 {
						rep.Leaked += d
						rep.find("%s: %s %s counted %d, the ledger holds %d", key, kind, k, have, want[k])
					} else if d < 0 {
						rep.LimitBreached++
						rep.find("%s: %s %s counted %d, below the %d the ledger holds (its limit no longer binds)", key, kind, k, have, want[k])
					}
				}
				for k, w := range want {
					if !seen[k] && w != 0 {
						rep.LimitBreached++
						rep.find("%s: %s %s not counted, the ledger holds %d", key, kind, k, w)
					}
				}
			}
		}

		// No oversell, by any witness (one count per promotion: the worst).
		var over int64
		redisGranted := st.Total - st.Remaining
		if st.Found && st.Total != p.Total {
			rep.find("%s: Redis total %d, created with %d", key, st.Total, p.Total)
			redisGranted = p.Total - st.Remaining
		}
		for name, g := range map[string]int64{"Redis": redisGranted, "clients": told.units, "ledger": ledger.units, "record": record.units} {
			if g > p.Total {
				over = max(over, g-p.Total)
				rep.find("%s: %s grants %d of %d", key, name, g, p.Total)
			}
		}
		if st.Found && st.Remaining < 0 {
			over = max(over, -st.Remaining)
		}
		rep.Oversold += over

		// Limits hold, by any witness.
		for name, s := range map[string]sums{"Redis": {pins: st.Pins, ips: st.IPs}, "clients": told, "record": record} {
			for pin, n := range s.pins {
				if p.PerPin > 0 && n > p.PerPin && !breached[key+" pin "+pin] {
					breached[key+" pin "+pin] = true
					rep.find("%s: pin %s holds %d by %s, limit %d", key, pin, n, name, p.PerPin)
				}
			}
			for ip, n := range s.ips {
				if p.PerIP > 0 && n > p.PerIP && !breached[key+" ip "+ip] {
					breached[key+" ip "+ip] = true
					rep.find("%s: ip %s holds %d by %s, limit %d", key, ip, n, name, p.PerIP)
				}
			}
		}

		// What the broker holds must be in the record.
		if snap.Broker != nil {
			kept := index(snap.Broker[key])
			for rid, ev := range kept.grab {
				if _, ok := rec.grab[rid]; !ok && !drifted[rid] {
					rep.Drift += ev.Num
					rep.find("%s %s: GRAB on the topic but not in the record", key, rid)
				}
			}
			// The sink skips a CANCEL whose GRAB is not in the record when it comes
			// (the rollback of a take never published). Skipping it is a fault only if
			// the record's GRAB is one the topic held before the CANCEL: a take rolled
			// back, then lost with its shard and granted afresh under the same requestId,
			// puts its GRAB after the skipped CANCEL, rightly.
			for rid, ev := range kept.cancel {
				g, inRecord := rec.grab[rid]
				if _, c := rec.cancel[rid]; !inRecord || c || drifted[rid] {
					continue
				}
				if tg, onTopic := kept.grabs[g.EventID]; onTopic && tg.Offset < ev.Offset {
					rep.Drift += ev.Num
					rep.find("%s %s: CANCEL on the topic after its GRAB, but not in the record", key, rid)
				}
			}
		}

		// Invariant 7, of an envelope pool.
		if p.IsPool() {
			verifyPool(&rep, p, st, snap.Splits[key], snap.Record[key], toldOn[key])
		} else if st.EnvAmount != 0 {
			rep.AmountDrift += st.EnvAmount
			rep.find("%s: Redis holds a pool of %d (envAmount), created as no pool", key, st.EnvAmount)
		}
	}
	rep.LimitBreached += len(breached)
	return rep
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
