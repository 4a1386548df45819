package rebuild

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
)

// Record is what a rebuild reads from the system of record (store.Rebuild).
type Record interface {
	LivePromotions(ctx context.Context) ([]store.Promotion, error)
	EachFlow(ctx context.Context, id store.ID, fn func(store.FlowRow) error) error
	GrabRows(ctx context.Context, id store.ID, requestIDs []string) (map[string]store.FlowRow, error)
	EnvelopeSplit(ctx context.Context, id store.ID) (store.EnvelopeSplit, bool, error)
	EachIndexEntry(ctx context.Context, shard int, since time.Time, fn func(store.IndexEntry) error) error
	PendingChanges(ctx context.Context) ([]store.PendingChange, error)
	DeadLettered(ctx context.Context) (map[store.ID]int, error)
}

// FlowLog is what a rebuild reads of the holds and settles of the owed CANCELs
// (store.Flows).
type FlowLog interface {
	Holds(ctx context.Context, indexShard int, since time.Time) ([]store.RecordedHold, error)
	SettleOwedCancels(ctx context.Context, keep time.Duration) (int, error)
}

// rollbackReason is the CANCEL reason of an aborted take (grab-service's
// reconciler), whose ledger entry ends as X rather than R.
const rollbackReason = "ROLLBACK"

// Restored counts what one promotion's rebuild wrote.
type Restored struct {
	Key       string
	Remaining int64
	Pins, IPs int
	Ledger    int
	// NoBodyHash counts ledger entries whose GRAB row has no body hash (written
	// before migration 0002, or by a producer that does not send it): they are
	// restored with h = "", so a replay of them answers REQUEST_ID_REUSED.
	NoBodyHash int
	// Envelopes counts an envelope pool's parts left, written to its sorted set.
	Envelopes int
	Warnings  []string
}

// staging names where a promotion is built before it replaces the live keys. They
// carry the promotion key as hash tag, so RENAME stays within one slot.
type staging struct{ hash, pins, ips, req, env string }

func stagingOf(key string) staging {
	p := "{" + key + "}:rebuild:"
	return staging{p + "hash", p + "pins", p + "ips", p + "req", p + "env"}
}

// restorePromotion writes one promotion from the record: first into staging keys
// (pipelined), then one MULTI replaces the six live keys (promo.Keys) with them,
// so the live promotion is either the old one or the rebuilt one, never half of
// each. The flow log is read in one pass, which also counts an envelope pool's
// held parts, so the pool and the ledger cannot disagree: docs/design.md,
// "Record and recovery". rowsRead (may be nil) is told how many flow rows were
// read so far, every flowBatch rows.
func restorePromotion(ctx context.Context, c redis.UniversalClient, rec Record, tg target, batch int, rowsRead func(int)) (Restored, error) {
	key := tg.key()
	r := &restore{rec: rec, tg: tg, key: key, st: stagingOf(key), w: newPipe(ctx, c, batch), out: Restored{Key: key}, rowsRead: rowsRead}
	// On an early return, the pipeline in flight still finishes first.
	defer r.w.wait()
	if err := r.stage(ctx); err != nil {
		return r.out, err
	}
	if err := swap(ctx, c, key, r.st, r.out); err != nil {
		return r.out, err
	}
	return r.out, nil
}

// restore is one promotion's rebuild, told in stages: read the pool's split, read
// the flow log, return the cancelled requests, settle remaining, write it staged.
type restore struct {
	rec      Record
	tg       target
	key      string
	st       staging
	w        *pipe
	pool     *store.EnvelopePool // nil for no pool
	t        flowTally
	req      *hset
	out      Restored
	rowsRead func(int)
}

// stage writes the promotion into its staging keys.
func (r *restore) stage(ctx context.Context) (err error) {
	st := r.st
	if err := r.w.do("UNLINK", st.hash, st.pins, st.ips, st.req, st.env); err != nil { // leftovers of a killed run
		return err
	}
	if r.pool, err = readPool(ctx, r.rec, r.tg, &r.out); err != nil {
		return err
	}
	r.t = flowTally{pins: newCounts(), ips: newCounts(), pool: r.pool}
	r.req = &hset{w: r.w, key: st.req}
	if err := r.readFlows(ctx); err != nil {
		return err
	}
	if err := r.returnCancelled(ctx); err != nil {
		return err
	}
	if err := r.req.close(); err != nil {
		return err
	}
	r.settleRemaining()
	if err := r.w.do(append([]any{"HSET", st.hash}, hashFields(r.tg, r.out.Remaining, r.pool)...)...); err != nil {
		return err
	}
	if r.out.Envelopes, err = putEnvelopes(r.w, st.env, r.pool); err != nil {
		return err
	}
	if r.out.Pins, err = putCounters(r.w, st.pins, r.t.pins, r.key, "pin", &r.out.Warnings); err != nil {
		return err
	}
	if r.out.IPs, err = putCounters(r.w, st.ips, r.t.ips, r.key, "ip", &r.out.Warnings); err != nil {
		return err
	}
	if err := r.w.flush(); err != nil {
		return fmt.Errorf("stage %s: %w", r.key, err)
	}
	return nil
}

// returnCancelled looks up the GRAB rows of the cancelled requests, by key, and
// rewrites their ledger entries as returned (a later HSET of the same field
// wins), giving a pool's parts back.
func (r *restore) returnCancelled(ctx context.Context) error {
	for chunk := range slices.Chunk(r.t.cancels, cancelLookup) {
		ids := make([]string, len(chunk))
		for i, cr := range chunk {
			ids[i] = cr.RequestID
		}
		grabs, err := r.rec.GrabRows(ctx, r.tg.p.ID(), ids)
		if err != nil {
			return err
		}
		for _, cr := range chunk {
			g, ok := grabs[cr.RequestID] // a CANCEL without its GRAB leaves no entry
			if !ok {
				continue
			}
			if part, ok, _ := r.tg.part(g); ok {
				if err := putLedger(r.req, g, part, splitOf(r.pool), true, cr.Reason); err != nil {
					return err
				}
				if r.pool != nil {
					r.pool.GiveBack(g.Parts)
				}
			}
		}
	}
	return nil
}

// settleRemaining is the remaining the flow log leaves the target, with a
// warning for each way the record is at odds with itself.
func (r *restore) settleRemaining() {
	p, tg, t, out, key := r.tg.p, r.tg, &r.t, &r.out, r.key
	total := bucket.Shares(p.Spec.Total, tg.layout.K)[tg.bucket]
	out.Remaining = total - (t.granted - t.returned)
	if out.Remaining < 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s: the flow log grants %d of total %d; remaining written as 0", key, t.granted-t.returned, total))
		out.Remaining = 0
	}
	if t.badBucket > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s: %d flow rows name a bucket outside 0..%d; left out", key, t.badBucket, tg.layout.K-1))
	}
	// promotion.remaining is the promotion's, not one bucket's.
	if r.pool != nil {
		// The pool's parts are its stock: q.lua takes num of them for num units.
		if left := int64(len(r.pool.Left())); left != out.Remaining {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s: the flow log leaves %d units but %d envelopes; remaining written as the envelopes", key, out.Remaining, left))
			out.Remaining = left
		}
		for _, odd := range r.pool.Odd() {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%s: envelope pool: %s", key, odd))
		}
	}
	if tg.layout.K == 1 && p.Remaining != out.Remaining {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s: promotion.remaining is %d but the flow log gives %d; the flow log wins", key, p.Remaining, out.Remaining))
	}
	if p.Pending != nil {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s: admin change %s v%d pending; restored v%d, promo-admin's resolver settles the change", key, p.Pending.Op, p.Pending.Version, p.Version))
	}
}

// readFlows reads the promotion's flow log once, keeping the rows with a part on
// the target's bucket (all of an ordinary promotion's), and hands them in batches
// to two goroutines (fanout), so reading, summing and encoding share the cores.
func (r *restore) readFlows(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f := newFanout(r.rowsRead)
	go f.tally(&r.t)
	go f.stage(r.req, splitOf(r.pool), cancel)
	err := r.rec.EachFlow(ctx, r.tg.p.ID(), func(row store.FlowRow) error {
		part, ok, bad := r.tg.part(row)
		if bad {
			r.t.badBucket++ // the tally goroutine never writes it
		}
		if !ok {
			return nil
		}
		if !row.Cancel {
			r.out.Ledger++
			if row.BodyHash == "" {
				r.out.NoBodyHash++
			}
		}
		f.add(partRow{row, part})
		return nil
	})
	if serr := f.close(); serr != nil {
		return serr // the first cause; the read's error is then only its cancellation
	}
	return err
}

// fanout hands the flow rows read, flowBatch at a time, to one goroutine summing
// them into the tally (and a pool's held parts) and one staging the ledger
// entries of the GRAB rows.
type fanout struct {
	toTally, toLedger chan []partRow
	tallied           chan struct{}
	staged            chan error
	batch             []partRow
	rows              int
	rowsRead          func(int)
}

func newFanout(rowsRead func(int)) *fanout {
	return &fanout{toTally: make(chan []partRow, 4), toLedger: make(chan []partRow, 4),
		tallied: make(chan struct{}), staged: make(chan error, 1),
		batch: make([]partRow, 0, flowBatch), rowsRead: rowsRead}
}

// tally sums the rows into t.
func (f *fanout) tally(t *flowTally) {
	for batch := range f.toTally {
		t.addBatch(batch)
	}
	close(f.tallied)
}

// stage stages the GRAB rows' ledger entries, with their parts' amounts from
// split (nil for no pool); its first error cancels the read.
func (f *fanout) stage(req *hset, split *store.EnvelopeSplit, cancel func()) {
	var err error
	for batch := range f.toLedger {
		for _, r := range batch {
			if err == nil && !r.Cancel {
				if err = putLedger(req, r.FlowRow, r.part, split, false, ""); err != nil {
					cancel() // stops the read
				}
			}
		}
	}
	f.staged <- err
}

func (f *fanout) add(r partRow) {
	if f.batch = append(f.batch, r); len(f.batch) == flowBatch {
		f.send()
	}
}

func (f *fanout) send() {
	f.toTally <- f.batch
	f.toLedger <- f.batch
	if f.rows += len(f.batch); f.rowsRead != nil {
		f.rowsRead(f.rows)
	}
	f.batch = make([]partRow, 0, flowBatch) // the two readers share the old one
}

// close sends the last batch, waits for both goroutines and returns the
// staging's error.
func (f *fanout) close() error {
	if len(f.batch) > 0 {
		f.send()
	}
	close(f.toTally)
	close(f.toLedger)
	<-f.tallied
	return <-f.staged
}

// flowBatch is how many flow rows go to the summing and ledger goroutines at a time.
const flowBatch = 1024

// cancelLookup is how many cancelled requests one GrabRows query asks for.
const cancelLookup = 500

// partRow is a flow row with the letters of its grab's part on the bucket being
// restored (promo.PartAll for an ordinary promotion).
type partRow struct {
	store.FlowRow
	part string
}

// flowTally is what the flow log sums to: the contract's Σ GRAB − Σ CANCEL, per
// bucket (promotion), pin and ip, and the CANCEL rows whose ledger entries are
// rewritten. Each part counts only what it took: the stock with s, the pin with p,
// the ip with i. An envelope pool's GRAB rows hold their parts in pool (nil for no
// pool); the caller gives back those of the cancelled requests.
type flowTally struct {
	granted, returned int64
	pins, ips         *counts
	keys              []counterKeys // addBatch's
	cancels           []store.FlowRow
	pool              *store.EnvelopePool
	badBucket         int // rows naming a bucket the promotion lacks (the reader's)
}

func (t *flowTally) add(r partRow, c *counterKeys) {
	n := r.Num
	stock := has(r.part, promo.PartStock)
	if r.Cancel {
		if stock {
			t.returned += n
		}
		t.cancels = append(t.cancels, store.FlowRow{RequestID: r.RequestID, Reason: r.Reason})
		n = -n
	} else {
		if stock {
			t.granted += n
		}
		if t.pool != nil {
			t.pool.Hold(r.Parts)
		}
	}
	if c.pin {
		t.pins.add(r.Pin, c.pinHash, n)
	}
	if c.ip {
		t.ips.add(c.ipKey, c.ipHash, n)
	}
}

// addBatch sums rows: their counters' keys are hashed, then their slots touched
// in a loop that does nothing else, so that many reads are in flight at once
// (counts), then the rows added.
func (t *flowTally) addBatch(rows []partRow) {
	keys := t.keys[:0]
	for _, r := range rows {
		c := counterKeys{pin: has(r.part, promo.PartPin), ip: has(r.part, promo.PartIP)}
		if c.pin {
			c.pinHash = t.pins.hash(r.Pin)
		}
		if c.ip {
			c.ipKey = ipCounterKey(r.IP) // the field q.lua counted (promo.IPKey)
			c.ipHash = t.ips.hash(c.ipKey)
		}
		keys = append(keys, c)
	}
	for i := range keys {
		c := &keys[i]
		if c.pin {
			t.pins.touch(c.pinHash)
		}
		if c.ip {
			t.ips.touch(c.ipHash)
		}
	}
	for i, r := range rows {
		t.add(r, &keys[i])
	}
	clear(keys) // the ip keys
	t.keys = keys
}

// counterKeys are the pin and ip counters a row adds to, if any, with their
// hashes.
type counterKeys struct {
	pin, ip         bool
	ipKey           string
	pinHash, ipHash uint64
}

// ipCounterKey is promo.IPCounterKey(ip) without parsing a string that holds no
// colon: netip reads such a string only as an IPv4 address in canonical form
// (four decimal octets, no leading zeros), or not at all, and either way it is
// its own key. Most of the flow log's rows are IPv4, and a parse of each would
// be an address built and printed again per row, twice.
func ipCounterKey(ip string) string {
	if strings.IndexByte(ip, ':') < 0 {
		return ip
	}
	return promo.IPCounterKey(ip)
}

// putLedger stages the ledger entry of a GRAB row's part; of a pool's (split not
// nil), with the parts it took.
func putLedger(req *hset, g store.FlowRow, part string, split *store.EnvelopeSplit, cancelled bool, reason string) error {
	e := ledgerEntry(g, part, cancelled, reason)
	if split != nil {
		e.Amount, e.Parts = envelopeTake(g.Parts, split.Parts)
	}
	return req.putEntry(g.RequestID, e)
}

// hashFields is the promotion hash (lua/README.md) as create.lua writes it, with
// remaining from the record and the rate window restarting empty: field, value,
// field, value... A bucket's is as lua.CreateBuckets writes it: its share of the total,
// the rate limit over K rounded up, and buckets = K.
//
// A pool's adds envAmount, envLeft and envDigest (lua/README.md), as create.lua
// writes them: envLeft the sum of the parts left, envDigest the split's
// fingerprint, so a create of the same version with another split is EXISTS.
func hashFields(tg target, remaining int64, pool *store.EnvelopePool) []any {
	p, s, k := tg.p, tg.p.Spec, int64(tg.layout.K)
	var rateLimit, windowMs int64
	if s.RateLimit != nil {
		rateLimit, windowMs = bucket.RateShare(s.RateLimit.Limit, int(k)), s.RateLimit.WindowSeconds*1000
	}
	state := string(promo.Active)
	if p.State != promo.Active {
		state = string(promo.Stopped) // the hash knows ACTIVE and STOPPED only
	}
	fields := []any{
		"ver", p.Version, "total", bucket.Shares(s.Total, tg.layout.K)[tg.bucket], "remaining", remaining,
		"perPin", s.PerPinLimit, "perIp", s.PerIPLimit, "maxPerGrab", s.MaxPerGrab,
		"rateLimit", rateLimit, "rateWindowMs", windowMs, "winCount", 0, "winStart", 0,
		"startMs", s.StartAt.UnixMilli(), "endMs", s.EndAt.UnixMilli(), "state", state,
	}
	if k > 1 { // create.lua writes it only above 1
		fields = append(fields, "buckets", k)
	}
	if s.Channels != promo.EveryChannel { // likewise only when it names some: every bucket has it
		fields = append(fields, "channels", int64(s.Channels))
	}
	if pool != nil {
		fields = append(fields, "envAmount", pool.Amount, "envLeft", pool.LeftAmount(), "envDigest", lua.EnvelopeDigest(pool.Parts))
	}
	return fields
}

// putCounters writes the non-zero counters; a negative one (a CANCEL the record
// kept without its GRAB, which the sink never stores) is left out and reported,
// and a zero one (everything returned) is left out as q.lua would never write it.
func putCounters(w *pipe, key string, counters *counts, promoKey, what string, warnings *[]string) (int, error) {
	h := &hset{w: w, key: key}
	n := 0
	for i, who := range counters.keys {
		v := counters.sums[i]
		if v == 0 {
			continue
		}
		if v < 0 {
			*warnings = append(*warnings, fmt.Sprintf("%s: %s %q nets %d in the flow log; left out", promoKey, what, who, v))
			continue
		}
		if err := h.putInt(who, v); err != nil {
			return n, err
		}
		n++
	}
	return n, h.close()
}

// ledgerEntry is the settled entry a request leaves: G while granted, R once
// returned, X when the return was the rollback of an aborted take. The deadline
// only matters to pending entries, and a rebuilt ledger has none, so it is 0. A
// part of a bucketed grab keeps its letters in k, as q.lua writes them (none for
// a part that is all three).
func ledgerEntry(g store.FlowRow, part string, cancelled bool, reason string) lua.LedgerEntry {
	e := lua.LedgerEntry{State: lua.LedgerCommitted, BodyHash: g.BodyHash, Num: g.Num, Pin: g.Pin, IP: g.IP}
	if k := ipCounterKey(g.IP); k != g.IP {
		e.IPKey = k // as q.lua keeps it, so a return releases the rebuilt count
	}
	if part != promo.PartAll {
		e.Part = part
	}
	switch {
	case cancelled && reason == rollbackReason:
		e.State = lua.LedgerAbortRecorded
	case cancelled:
		e.State, e.Reason = lua.LedgerReturned, reason
	}
	return e
}

// swap replaces the live keys with the staged ones in one transaction; the pending
// set starts empty.
func swap(ctx context.Context, c redis.UniversalClient, key string, st staging, r Restored) error {
	live := promo.Keys(key)
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Unlink(ctx, live[:]...)
		p.Rename(ctx, st.hash, live[0])
		if r.Pins > 0 {
			p.Rename(ctx, st.pins, live[1])
		}
		if r.IPs > 0 {
			p.Rename(ctx, st.ips, live[2])
		}
		if r.Ledger > 0 {
			p.Rename(ctx, st.req, live[3])
		}
		if r.Envelopes > 0 {
			p.Rename(ctx, st.env, live[5])
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("swap in the rebuilt %s: %w", key, err)
	}
	return nil
}

// readPool reads the split of the envelope pool the target is, with nothing
// held yet (the pass over the flow log counts that); nil for a promotion that is
// no pool. A pool is of one bucket; a bucketed row naming one is restored as no
// pool, with a warning (the record should never hold it).
func readPool(ctx context.Context, rec Record, tg target, out *Restored) (*store.EnvelopePool, error) {
	if tg.p.Spec.Envelope == nil {
		return nil, nil
	}
	if tg.layout.K > 1 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%s: an envelope pool in %d buckets; restored as no pool", out.Key, tg.layout.K))
		return nil, nil
	}
	split, ok, err := rec.EnvelopeSplit(ctx, tg.p.ID())
	if err != nil || !ok {
		return nil, err
	}
	pool := store.NewEnvelopePool(split)
	return &pool, nil
}

// splitOf is a pool's split, nil for no pool. The ledger goroutine reads it while
// the summing one counts the pool's held parts.
func splitOf(pool *store.EnvelopePool) *store.EnvelopeSplit {
	if pool == nil {
		return nil
	}
	return &pool.EnvelopeSplit
}

// envelopeTake is a pool ledger entry's a and e (lua.LedgerEntry) for the parts a
// GRAB row took, with their amounts from the split. A row that names no parts, or
// one the split lacks (store.EnvelopePool.Odd reports it), leaves both empty.
func envelopeTake(parts []int, split []int64) (amount int64, members string) {
	if len(parts) == 0 {
		return 0, ""
	}
	for _, p := range parts {
		if p >= len(split) {
			return 0, ""
		}
		amount += split[p]
	}
	return amount, lua.EnvelopeParts(parts, split)
}

// putEnvelopes writes a pool's parts left into its sorted set (member
// lua.EnvelopeMember, score idx), lua.MaxEnvelopeStage members a command, and
// returns how many.
func putEnvelopes(w *pipe, key string, pool *store.EnvelopePool) (int, error) {
	if pool == nil {
		return 0, nil
	}
	left := pool.Left()
	for chunk := range slices.Chunk(left, lua.MaxEnvelopeStage) {
		args := make([]any, 0, 2+2*len(chunk))
		args = append(args, "ZADD", key)
		for _, idx := range chunk {
			args = append(args, idx, lua.EnvelopeMember(idx, pool.Parts[idx]))
		}
		if err := w.do(args...); err != nil {
			return 0, err
		}
	}
	return len(left), nil
}
