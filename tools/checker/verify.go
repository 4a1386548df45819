package checker

import (
	"github.com/flashsale/platform/internal/promo"
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
	// NoIP holds the requests of a bucketed promotion whose grab counted the ip
	// nowhere (a part with q.lua's letter n): the ips' counters leave them out.
	NoIP map[string]bool
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
	v := verification{rep: Report{Promotions: len(promos), Requests: len(reqs)}, snap: snap, breached: map[string]bool{}}
	v.indexRequests(reqs)
	for _, p := range promos {
		v.promotion(p)
	}
	v.rep.LimitBreached += len(v.breached)
	return v.rep
}

// verification is one run of Verify: the report it builds, the snapshot, and the
// requests indexed by requestId and by the promotions they name.
type verification struct {
	rep      Report
	snap     Snapshot
	byID     map[string]*Request
	toldOn   map[string][]*Request // promotion key -> requests naming it
	breached map[string]bool       // "key pin p" / "key ip a" over a limit, counted once
}

// indexRequests indexes reqs and counts those with no definite answer.
func (v *verification) indexRequests(reqs []Request) {
	v.byID = make(map[string]*Request, len(reqs))
	v.toldOn = map[string][]*Request{}
	unresolved := map[string]bool{}
	for i := range reqs {
		r := &reqs[i]
		v.byID[r.RequestID] = r
		for _, it := range r.Items {
			v.toldOn[it.Key()] = append(v.toldOn[it.Key()], r)
		}
		if _, known := r.Held(); !known {
			unresolved[r.RequestID] = true
			v.rep.find("request %s: no definite answer (grab %s, cancel %q)", r.RequestID, r.Grab, r.Cancel)
		}
	}
	v.rep.Unresolved = len(unresolved)
}

// promotion checks p: each request's fate, the counters, oversell, limits, the
// broker against the record, and an envelope pool's money.
func (v *verification) promotion(p Promotion) {
	key := p.Key()
	c := &promoCheck{v: v, rep: &v.rep, p: p, key: key, st: v.snap.Redis[key], rec: index(v.snap.Record[key]),
		told: newSums(), ledger: newSums(), record: newSums(), drifted: map[string]bool{}}
	if !c.st.Found {
		c.rep.find("%s: no promotion hash in Redis", key)
	}
	nums := c.toldNums()
	for rid := range c.requestIDs() {
		f := c.fateOf(rid, nums[rid])
		c.sum(f)
		c.judge(f)
	}
	c.counters()
	c.oversell()
	c.limits()
	c.broker()
	if p.IsPool() {
		verifyPool(c.rep, p, c.st, v.snap.Splits[key], v.snap.Record[key], v.toldOn[key])
	} else if c.st.EnvAmount != 0 {
		c.rep.AmountDrift += c.st.EnvAmount
		c.rep.find("%s: Redis holds a pool of %d (envAmount), created as no pool", key, c.st.EnvAmount)
	}
}

// sums are held units in all and per pin / ip, by one witness. An ip is summed by
// the key q.lua counts it under (an IPv6 buyer by its prefix), so the sums compare
// with the shard's {..}:ips whatever address of the prefix each grab came from.
type sums struct {
	units     int64
	pins, ips map[string]int64
}

func newSums() sums { return sums{pins: map[string]int64{}, ips: map[string]int64{}} }

func (s *sums) add(pin, ip string, n int64) {
	s.units += n
	s.pins[pin] += n
	if ip != "" { // "": a grab that counted its ip nowhere
		s.ips[promo.IPCounterKey(ip)] += n
	}
}

// promoCheck is the check of one promotion: its state in Redis, its record, and
// the witness sums its requests add up to.
type promoCheck struct {
	v                    *verification
	rep                  *Report
	p                    Promotion
	key                  string
	st                   PromoState
	rec                  flows
	told, ledger, record sums
	drifted              map[string]bool // requests whose record disagrees, counted once
}

// requestIDs are every requestId any witness names for the promotion.
func (c *promoCheck) requestIDs() map[string]bool {
	rids := map[string]bool{}
	for rid := range c.st.Ledger {
		rids[rid] = true
	}
	for rid := range c.rec.grab {
		rids[rid] = true
	}
	for rid := range c.rec.cancel {
		rids[rid] = true
	}
	for _, r := range c.v.toldOn[c.key] {
		rids[r.RequestID] = true
	}
	return rids
}

// toldNums are the units each client asked of the promotion, by requestId.
func (c *promoCheck) toldNums() map[string]int64 {
	toldNum := map[string]int64{}
	for _, r := range c.v.toldOn[c.key] {
		for _, it := range r.Items {
			if it.Key() == c.key {
				toldNum[r.RequestID] = it.Num
			}
		}
	}
	return toldNum
}

// fate is one request at one promotion, as each witness tells it.
type fate struct {
	rid                       string
	r                         *Request // nil: never sent by a client under check
	toldHeld, known           bool
	e                         lua.LedgerEntry
	ledgerHeld, open, recHeld bool
	n                         int64 // its units: the client's, else the ledger's, else the record's
}

func (c *promoCheck) fateOf(rid string, told int64) fate {
	f := fate{rid: rid, r: c.v.byID[rid], known: true}
	if f.r != nil {
		f.toldHeld, f.known = f.r.Held()
	}
	e, inLedger := c.st.Ledger[rid]
	f.e = e
	f.ledgerHeld = inLedger && e.State == lua.LedgerCommitted
	f.open = inLedger && (e.State == lua.LedgerPending || e.State == lua.LedgerAborted || e.State == lua.LedgerCancelled)
	f.recHeld = c.rec.held(rid)
	f.n = told
	if f.n == 0 {
		f.n = e.Num
	}
	if f.n == 0 {
		f.n = c.rec.grab[rid].Num
	}
	return f
}

// sum adds f to the witnesses that hold it.
func (c *promoCheck) sum(f fate) {
	if f.toldHeld {
		c.told.add(f.r.Pin, f.r.IP, f.n)
	}
	if f.ledgerHeld {
		ip := f.e.IP
		if c.st.NoIP[f.rid] {
			ip = "" // counted nowhere: in the pins' sums alone
		}
		c.ledger.add(f.e.Pin, ip, f.e.Num)
		if f.r != nil && f.toldHeld && f.e.Num != f.n {
			c.rep.Drift += abs(f.e.Num - f.n)
			c.rep.find("%s %s: ledger holds %d, client was granted %d", c.key, f.rid, f.e.Num, f.n)
		}
	}
	if f.recHeld {
		g := c.rec.grab[f.rid]
		c.record.add(g.Pin, g.IP, g.Num)
	}
}

// judge counts where the witnesses of f disagree.
func (c *promoCheck) judge(f fate) {
	key, rid, e := c.key, f.rid, f.e
	switch {
	case f.open:
		c.rep.Leaked += e.Num
		c.rep.find("%s %s: take still open (ledger %s) after the stack settled", key, rid, e.State)
	case !f.known:
		// counted once as unresolved above
	case f.toldHeld && !f.ledgerHeld:
		c.rep.Lost += f.n
		c.rep.find("%s %s: client holds %d (grab %s, cancel %q) but the Redis ledger says %q", key, rid, f.n, f.r.Grab, f.r.Cancel, e.State)
	case !f.toldHeld && f.ledgerHeld:
		c.rep.Leaked += e.Num
		grab, cancel := "never sent", ""
		if f.r != nil {
			grab, cancel = f.r.Grab, f.r.Cancel
		}
		c.rep.find("%s %s: Redis holds %d for it but the client does not (grab %s, cancel %q)", key, rid, e.Num, grab, cancel)
	}
	if !f.open && f.ledgerHeld != f.recHeld {
		c.drifted[rid] = true
		c.rep.Drift += f.n
		c.rep.find("%s %s: Redis ledger %q (held %v) but the record holds it %v", key, rid, e.State, f.ledgerHeld, f.recHeld)
	}
}

// counters checks remaining, per pin and per ip against the ledger.
func (c *promoCheck) counters() {
	st, key := c.st, c.key
	if !st.Found {
		return
	}
	if want := c.p.Total - c.ledger.units; st.Remaining != want {
		if st.Remaining > want {
			c.rep.Oversold += st.Remaining - want
		} else {
			c.rep.Leaked += want - st.Remaining
		}
		c.rep.find("%s: remaining %d, but total %d minus the ledger's %d granted is %d", key, st.Remaining, c.p.Total, c.ledger.units, want)
	}
	for who, kind := range map[*map[string]int64]string{&st.Pins: "pin", &st.IPs: "ip"} {
		want := c.ledger.pins
		if kind == "ip" {
			want = c.ledger.ips
		}
		c.counted(kind, *who, want)
	}
}

// counted checks one kind of limit counter (pin or ip) against the ledger's sums.
func (c *promoCheck) counted(kind string, have, want map[string]int64) {
	seen := map[string]bool{}
	for k, h := range have {
		seen[k] = true
		if d := h - want[k]; d > 0 {
			c.rep.Leaked += d
			c.rep.find("%s: %s %s counted %d, the ledger holds %d", c.key, kind, k, h, want[k])
		} else if d < 0 {
			c.rep.LimitBreached++
			c.rep.find("%s: %s %s counted %d, below the %d the ledger holds (its limit no longer binds)", c.key, kind, k, h, want[k])
		}
	}
	for k, w := range want {
		if !seen[k] && w != 0 {
			c.rep.LimitBreached++
			c.rep.find("%s: %s %s not counted, the ledger holds %d", c.key, kind, k, w)
		}
	}
}

// oversell: no witness grants beyond the total (one count per promotion: the worst).
func (c *promoCheck) oversell() {
	st, p, key := c.st, c.p, c.key
	var over int64
	redisGranted := st.Total - st.Remaining
	if st.Found && st.Total != p.Total {
		c.rep.find("%s: Redis total %d, created with %d", key, st.Total, p.Total)
		redisGranted = p.Total - st.Remaining
	}
	for name, g := range map[string]int64{"Redis": redisGranted, "clients": c.told.units, "ledger": c.ledger.units, "record": c.record.units} {
		if g > p.Total {
			over = max(over, g-p.Total)
			c.rep.find("%s: %s grants %d of %d", key, name, g, p.Total)
		}
	}
	if st.Found && st.Remaining < 0 {
		over = max(over, -st.Remaining)
	}
	c.rep.Oversold += over
}

// limits: no pin or ip holds beyond its limit, by any witness.
func (c *promoCheck) limits() {
	p, key, breached := c.p, c.key, c.v.breached
	for name, s := range map[string]sums{"Redis": {pins: c.st.Pins, ips: c.st.IPs}, "clients": c.told, "record": c.record} {
		for pin, n := range s.pins {
			if p.PerPin > 0 && n > p.PerPin && !breached[key+" pin "+pin] {
				breached[key+" pin "+pin] = true
				c.rep.find("%s: pin %s holds %d by %s, limit %d", key, pin, n, name, p.PerPin)
			}
		}
		for ip, n := range s.ips {
			if p.PerIP > 0 && n > p.PerIP && !breached[key+" ip "+ip] {
				breached[key+" ip "+ip] = true
				c.rep.find("%s: ip %s holds %d by %s, limit %d", key, ip, n, name, p.PerIP)
			}
		}
	}
}

// broker: what the topic holds must be in the record.
func (c *promoCheck) broker() {
	if c.v.snap.Broker == nil {
		return
	}
	key, rec := c.key, c.rec
	kept := index(c.v.snap.Broker[key])
	for rid, ev := range kept.grab {
		if _, ok := rec.grab[rid]; !ok && !c.drifted[rid] {
			c.rep.Drift += ev.Num
			c.rep.find("%s %s: GRAB on the topic but not in the record", key, rid)
		}
	}
	// The sink skips a CANCEL whose GRAB was not yet in the record: a fault only if
	// the record's GRAB is one the topic held before the CANCEL (a take regranted
	// under the same requestId after a lost shard puts its GRAB after it, rightly).
	for rid, ev := range kept.cancel {
		g, inRecord := rec.grab[rid]
		if _, cancelled := rec.cancel[rid]; !inRecord || cancelled || c.drifted[rid] {
			continue
		}
		if tg, onTopic := kept.grabs[g.EventID]; onTopic && tg.Offset < ev.Offset {
			c.rep.Drift += ev.Num
			c.rep.find("%s %s: CANCEL on the topic after its GRAB, but not in the record", key, rid)
		}
	}
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
