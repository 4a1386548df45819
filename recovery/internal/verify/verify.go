// Package verify compares every live promotion's Redis counters with the system of
// record (invariant 4): remaining, every per-pin and per-ip counter, bucket by
// bucket for a bucketed promotion, and an envelope pool's amounts, digest and
// parts left (store.EnvelopePool); and each bucket's channels with the row's. Fit
// to run as a periodic job: one summary line and exit 0 when clean, one line per
// drift and exit 1 otherwise. A live sale raises no false alarm: a promotion with
// takes open is "in flight" and its counters not compared, the flow sink's
// catch-up is awaited first, and a promotion that differs is checked again
// (Rechecks) before it is reported.
package verify

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
	"github.com/flashsale/platform/recovery/internal/flowlag"
	"github.com/flashsale/platform/recovery/internal/progress"
)

// Record is what verify reads from the system of record (store.Rebuild).
type Record interface {
	LivePromotions(ctx context.Context) ([]store.Promotion, error)
	FlowCounters(ctx context.Context, id store.ID) (store.FlowCounters, error)
	EnvelopePool(ctx context.Context, id store.ID) (store.EnvelopePool, bool, error)
	DeadLettered(ctx context.Context) (map[store.ID]int, error)
	IndexRecord
}

// Options say what to check.
type Options struct {
	Shards       []int // nil: every shard
	CatchUp      time.Duration
	Rechecks     int
	RecheckDelay time.Duration
	// Index also checks every shard's request index against the record's GRAB rows
	// (it reads every GRAB row of the last 30 days: a heavier job).
	Index bool
	// Progress receives the progress bar (stderr); nil for none.
	Progress io.Writer
}

// Defaults suit a periodic job.
func Defaults() Options {
	return Options{CatchUp: 30 * time.Second, Rechecks: 2, RecheckDelay: time.Second}
}

// Deps are the connections of a run.
type Deps struct {
	Shards []redis.UniversalClient
	Record Record
	Lag    *flowlag.Meter // nil: do not wait for the sink
	Log    *slog.Logger
}

// Drift is one counter that differs. What is "promotion" (hash missing),
// "remaining", "pin" or "ip", Who the pin or ip; or "request index", Redis and Record
// the entries present and due on the shard, Who one of the missing keys; or, of an
// envelope pool, "envAmount" or "envLeft", "envDigest" (Who the two digests), or
// "envelopes" (Redis and Record the parts left, Who the first part that differs);
// or "channels" (Redis and Record the bitmasks, -1 for a field that is none; Who
// the two sets by name).
type Drift struct {
	Key           string
	Shard         int
	What, Who     string
	Redis, Record int64
}

func (d Drift) String() string {
	switch d.What {
	case "promotion":
		return fmt.Sprintf("DRIFT  %s  shard %d  promotion missing from Redis (record: remaining %d)", d.Key, d.Shard, d.Record)
	case "remaining", "envAmount", "envLeft":
		return fmt.Sprintf("DRIFT  %s  shard %d  %s  redis=%d  record=%d", d.Key, d.Shard, d.What, d.Redis, d.Record)
	case "envDigest":
		return fmt.Sprintf("DRIFT  %s  shard %d  envDigest  %s (the hash's split is not the record's)", d.Key, d.Shard, d.Who)
	case "channels":
		return fmt.Sprintf("DRIFT  %s  shard %d  channels  %s (q.lua allows grabs by the hash's)", d.Key, d.Shard, d.Who)
	case "envelopes":
		return fmt.Sprintf("DRIFT  %s  shard %d  envelopes left  redis=%d  record=%d  (first difference: %s)", d.Key, d.Shard, d.Redis, d.Record, d.Who)
	case "dead letters":
		return fmt.Sprintf("DRIFT  %s  dead letters  %d flow events in the dead-letter topic are not in the record, which may lack them; replay them (deploy/RUNBOOK.md, \"Alert: FlowSinkDeadLetters\")", d.Key, d.Record)
	case "request index":
		return fmt.Sprintf("DRIFT  request index  shard %d  entries redis=%d  record=%d  (missing e.g. %s; bin/recovery rebuild --shard %d restores them)",
			d.Shard, d.Redis, d.Record, d.Who, d.Shard)
	}
	return fmt.Sprintf("DRIFT  %s  shard %d  %s %q  redis=%d  record=%d", d.Key, d.Shard, d.What, d.Who, d.Redis, d.Record)
}

// Checked is one promotion's outcome.
type Checked struct {
	Key       string
	Shard     int
	Remaining int64 // Redis
	Total     int64
	Pins, IPs int   // counters in Redis
	Open      int64 // takes in flight; > 0 means not compared
	Drifts    []Drift
}

// Report is a run's outcome.
type Report struct {
	Promotions []Checked
	Shards     []int
	CatchUp    string
	// IndexChecked says the request index was checked; IndexDrifts are its drifts.
	IndexChecked bool
	IndexDrifts  []Drift
	// DeadLetters names the checked promotions (and, as "(none readable)", the
	// letters naming no promotion) with dead letters not replayed yet.
	DeadLetters []Drift
}

// Drifts lists every drift found.
func (r Report) Drifts() []Drift {
	var out []Drift
	for _, p := range r.Promotions {
		out = append(out, p.Drifts...)
	}
	return append(append(out, r.IndexDrifts...), r.DeadLetters...)
}

// Run checks every live promotion of the chosen shards.
func Run(ctx context.Context, d Deps, o Options) (Report, error) {
	rep := Report{Shards: o.Shards, CatchUp: "confirmed"}
	if len(d.Shards) != ring.Shards {
		return rep, fmt.Errorf("verify: %d shard clients, want %d", len(d.Shards), ring.Shards)
	}
	v := verifier{d: d, o: o, want: map[int]bool{}}
	for _, s := range o.Shards {
		if s < 0 || s >= ring.Shards {
			return rep, fmt.Errorf("verify: shard %d is not in 0..%d", s, ring.Shards-1)
		}
		v.want[s] = true
	}
	rep.CatchUp = v.waitSink(ctx)
	if err := v.checkPromotions(ctx, &rep); err != nil {
		return rep, err
	}
	if err := v.checkDeadLetters(ctx, &rep); err != nil {
		return rep, err
	}
	if o.Index {
		rep.IndexChecked = true
		if err := v.checkIndexes(ctx, &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// verifier is one run of Run: its connections, options and wanted shards (none:
// every shard).
type verifier struct {
	d    Deps
	o    Options
	want map[int]bool
}

// waitSink waits for the flow sink to store what Kafka holds, and says how that went.
func (v verifier) waitSink(ctx context.Context) string {
	if v.d.Lag == nil {
		return "not checked (no Kafka brokers configured)"
	}
	if err := v.d.Lag.WaitCaughtUp(ctx, v.o.CatchUp, 200*time.Millisecond); err != nil {
		v.d.Log.Warn("flow sink catch-up not confirmed; drifts may be sink lag", "err", err.Error())
		return "NOT CONFIRMED: " + err.Error()
	}
	return "confirmed"
}

// checkPromotions checks every live promotion with a bucket on the wanted shards.
func (v verifier) checkPromotions(ctx context.Context, rep *Report) error {
	live, err := v.d.Record.LivePromotions(ctx)
	if err != nil {
		return err
	}
	var mine []store.Promotion
	for _, p := range live {
		if len(bucketsOn(p, v.want)) > 0 {
			mine = append(mine, p)
		}
	}
	bar := progress.New(v.o.Progress, len(mine), "verify", "promotions")
	for _, p := range mine {
		cs, err := v.checkPromotion(ctx, p)
		if err != nil {
			return err
		}
		rep.Promotions = append(rep.Promotions, cs...)
		if bar != nil {
			_ = bar.Add(1)
		}
	}
	return nil
}

// checkPromotion checks p, and again up to Rechecks times while it differs: a
// grant between the Redis and the MySQL read is not drift.
func (v verifier) checkPromotion(ctx context.Context, p store.Promotion) ([]Checked, error) {
	cs, err := check(ctx, v.d.Shards, v.d.Record, p, bucketsOn(p, v.want))
	for n := 0; err == nil && drifted(cs) && n < v.o.Rechecks; n++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(v.o.RecheckDelay):
		}
		v.waitSink(ctx)
		cs, err = check(ctx, v.d.Shards, v.d.Record, p, bucketsOn(p, v.want))
	}
	return cs, err
}

// checkIndexes checks the request index of every wanted shard.
func (v verifier) checkIndexes(ctx context.Context, rep *Report) error {
	var shards []int
	for s := range ring.Shards {
		if len(v.want) == 0 || v.want[s] {
			shards = append(shards, s)
		}
	}
	bar := progress.New(v.o.Progress, len(shards), "verify the request index", "shards")
	for _, s := range shards {
		drift, err := checkIndex(ctx, v.d.Shards[s], v.d.Record, s, time.Now())
		if err != nil {
			return err
		}
		if drift != nil {
			rep.IndexDrifts = append(rep.IndexDrifts, *drift)
		}
		if bar != nil {
			_ = bar.Add(1)
		}
	}
	return nil
}

// bucketsOn lists the buckets of p that live on the wanted shards (all of them
// when none is named): an ordinary promotion has one, bucket 0.
func bucketsOn(p store.Promotion, want map[int]bool) []int {
	var out []int
	for b, s := range layoutOf(p).Shards {
		if len(want) == 0 || want[s] {
			out = append(out, b)
		}
	}
	return out
}

// layoutOf is where p's buckets live; a bucket count the layout does not know
// (the record never holds one) is read as 1, as the rebuild reads it.
func layoutOf(p store.Promotion) bucket.Layout {
	if l := bucket.LayoutOf(ring.Default, p.ID().Key(), promo.BucketsOf(p.Spec.Buckets)); l.K > 0 {
		return l
	}
	return bucket.LayoutOf(ring.Default, p.ID().Key(), 1)
}

func drifted(cs []Checked) bool {
	for _, c := range cs {
		if len(c.Drifts) > 0 {
			return true
		}
	}
	return false
}

// redisSide is one bucket's Redis counters, read in one transaction.
type redisSide struct {
	hash, pins, ips map[string]string
	open            int64
	envelopes       []string // an envelope pool's parts left, by idx
}

// check reads the Redis counters of the promotion's buckets (each in one
// transaction: a consistent snapshot of the bucket), then the flow log, and
// compares them bucket by bucket.
func check(ctx context.Context, shards []redis.UniversalClient, rec Record, p store.Promotion, buckets []int) ([]Checked, error) {
	l := layoutOf(p)
	sides := make([]redisSide, len(buckets))
	for i, b := range buckets {
		key, shard := l.Keys[b], l.Shards[b]
		var hash, pins, ips *redis.MapStringStringCmd
		var open *redis.IntCmd
		var envelopes *redis.StringSliceCmd
		_, err := shards[shard].TxPipelined(ctx, func(pp redis.Pipeliner) error {
			hash = pp.HGetAll(ctx, key)
			pins = pp.HGetAll(ctx, promo.PinsKey(key))
			ips = pp.HGetAll(ctx, promo.IPsKey(key))
			open = pp.ZCard(ctx, promo.PendingKey(key))
			if p.Spec.Envelope != nil {
				envelopes = pp.ZRange(ctx, promo.EnvelopeKey(key), 0, -1)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("verify: read %s on shard %d: %w", key, shard, err)
		}
		sides[i] = redisSide{hash: hash.Val(), pins: pins.Val(), ips: ips.Val(), open: open.Val()}
		if envelopes != nil {
			sides[i].envelopes = envelopes.Val()
		}
	}
	counters, err := rec.FlowCounters(ctx, p.ID())
	if err != nil {
		return nil, err
	}
	var pool *store.EnvelopePool
	if p.Spec.Envelope != nil && l.K == 1 { // a pool is of one bucket
		ep, ok, err := rec.EnvelopePool(ctx, p.ID())
		if err != nil {
			return nil, err
		}
		if ok {
			pool = &ep
		}
	}
	shares := bucket.Shares(p.Spec.Total, l.K)
	out := make([]Checked, len(buckets))
	for i, b := range buckets {
		out[i] = compareBucket(l, b, shares[b], sides[i], counters, pool)
		out[i].Drifts = append(out[i].Drifts, compareChannels(l.Keys[b], l.Shards[b], sides[i].hash, p)...)
	}
	return out, nil
}

// compareChannels compares a bucket's field channels (absent or 0: every
// channel) with the record's promotion.channels. q.lua decides
// CHANNEL_NOT_ALLOWED from each bucket's own field, so every bucket is held to
// it, takes in flight or not (they change counters, never the channels). A
// patch written to Redis and not promoted yet is no drift: the pending change's
// channels pass too. A missing hash is reported as such (compareBucket).
func compareChannels(key string, shard int, hash map[string]string, p store.Promotion) []Drift {
	if len(hash) == 0 {
		return nil
	}
	raw, want := hash["channels"], p.Spec.Channels
	have, ok := parseChannels(raw)
	if ok && (have == want || (p.Pending != nil && have == p.Pending.Spec.Channels)) {
		return nil
	}
	d := Drift{Key: key, Shard: shard, What: "channels", Redis: int64(have), Record: int64(want),
		Who: fmt.Sprintf("redis=%s  record=%s", channelsText(have), channelsText(want))}
	if !ok {
		d.Redis, d.Who = -1, fmt.Sprintf("redis=%q (no channel bitmask)  record=%s", raw, channelsText(want))
	}
	return []Drift{d}
}

// parseChannels reads the hash's field channels as q.lua does: absent is every
// channel, else a bitmask of the contract's channels.
func parseChannels(raw string) (promo.Channels, bool) {
	if raw == "" {
		return promo.EveryChannel, true
	}
	n, err := strconv.ParseUint(raw, 10, 8)
	if err != nil || !promo.Channels(n).Valid() {
		return 0, false
	}
	return promo.Channels(n), true
}

// channelsText names a set of channels for a drift line.
func channelsText(cs promo.Channels) string {
	if cs == promo.EveryChannel {
		return "every channel"
	}
	return cs.String()
}

// comparePool compares an envelope pool's Redis side with the record: envAmount
// with the budget, envDigest with the split's, envLeft with the sum of the parts
// left, and the parts left one by one (the first that differs is named).
func comparePool(key string, shard int, side redisSide, pool store.EnvelopePool) []Drift {
	var out []Drift
	if n := parse(side.hash["envAmount"]); n != pool.Amount {
		out = append(out, Drift{Key: key, Shard: shard, What: "envAmount", Redis: n, Record: pool.Amount})
	}
	if have, want := side.hash["envDigest"], lua.EnvelopeDigest(pool.Parts); have != want {
		out = append(out, Drift{Key: key, Shard: shard, What: "envDigest", Who: fmt.Sprintf("redis=%q  record=%q", have, want)})
	}
	if n, want := parse(side.hash["envLeft"]), pool.LeftAmount(); n != want {
		out = append(out, Drift{Key: key, Shard: shard, What: "envLeft", Redis: n, Record: want})
	}
	left := pool.Left()
	if first := firstPartDiffering(side.envelopes, left, pool.Parts); first != "" {
		out = append(out, Drift{Key: key, Shard: shard, What: "envelopes", Who: first, Redis: int64(len(side.envelopes)), Record: int64(len(left))})
	}
	return out
}

// firstPartDiffering walks the pool's sorted set (members by idx) beside the
// record's parts left (idx ascending) and describes the first part in which they
// differ, "" when they agree.
func firstPartDiffering(members []string, left []int, split []int64) string {
	for i := 0; i < len(members) || i < len(left); i++ {
		var have, want string
		haveIdx, wantIdx := -1, -1
		if i < len(members) {
			have = members[i]
			idx, _, err := lua.ParseEnvelopeMember(have)
			if err != nil {
				return fmt.Sprintf("redis holds %q, no part", have)
			}
			haveIdx = idx
		}
		if i < len(left) {
			wantIdx = left[i]
			want = lua.EnvelopeMember(wantIdx, split[wantIdx])
		}
		switch {
		case have == want:
			continue
		case haveIdx >= 0 && (wantIdx < 0 || haveIdx < wantIdx):
			return fmt.Sprintf("part %d: redis %s, record handed out", haveIdx, have)
		case wantIdx >= 0 && (haveIdx < 0 || wantIdx < haveIdx):
			return fmt.Sprintf("part %d: redis handed out, record %s", wantIdx, want)
		default:
			return fmt.Sprintf("part %d: redis %s, record %s", haveIdx, have, want)
		}
	}
	return ""
}

// compareBucket compares bucket b's Redis counters with what the flow log says it
// holds: its share less its net, the pins and ips whose home it is (every one of
// an ordinary promotion). An envelope pool (pool not nil; a pool is of one bucket)
// holds the number of its parts left as remaining, which is what q.lua takes from
// and the rebuild writes, and is compared part by part (comparePool).
func compareBucket(l bucket.Layout, b int, share int64, side redisSide, counters store.FlowCounters, pool *store.EnvelopePool) Checked {
	key, shard := l.Keys[b], l.Shards[b]
	out := Checked{Key: key, Shard: shard, Total: share}
	wantRemaining := share - counters.ByBucket[b]
	if pool != nil {
		wantRemaining = int64(len(pool.Left()))
	}
	if len(side.hash) == 0 {
		out.Drifts = append(out.Drifts, Drift{Key: key, Shard: shard, What: "promotion", Record: wantRemaining})
		return out
	}
	out.Remaining = parse(side.hash["remaining"])
	out.Pins, out.IPs = len(side.pins), len(side.ips)
	if out.Open = side.open; out.Open > 0 {
		return out
	}
	if out.Remaining != wantRemaining {
		out.Drifts = append(out.Drifts, Drift{Key: key, Shard: shard, What: "remaining", Redis: out.Remaining, Record: wantRemaining})
	}
	out.Drifts = append(out.Drifts, compare(key, shard, "pin", side.pins, homed(counters.Pins, l.K, b))...)
	out.Drifts = append(out.Drifts, compare(key, shard, "ip", side.ips, homed(promo.ByIPKey(counters.IPs), l.K, b))...)
	if pool != nil {
		out.Drifts = append(out.Drifts, comparePool(key, shard, side, *pool)...)
	}
	return out
}

// homed keeps the nets of those (pins or ips) whose home is bucket b of k.
func homed(nets map[string]int64, k, b int) map[string]int64 {
	if k == 1 {
		return nets
	}
	out := map[string]int64{}
	for who, n := range nets {
		if bucket.Home(who, k) == b {
			out[who] = n
		}
	}
	return out
}

// compare lists every field whose Redis value differs from the record's net; an
// absent field counts as 0 on either side.
func compare(key string, shard int, what string, redisSide map[string]string, record map[string]int64) []Drift {
	var out []Drift
	for who, v := range redisSide {
		if n := parse(v); n != record[who] {
			out = append(out, Drift{Key: key, Shard: shard, What: what, Who: who, Redis: n, Record: record[who]})
		}
	}
	for who, n := range record {
		if _, ok := redisSide[who]; !ok && n != 0 {
			out = append(out, Drift{Key: key, Shard: shard, What: what, Who: who, Redis: 0, Record: n})
		}
	}
	return out
}

// parse reads a counter; a value that is not an integer reads as -1, which no
// record net equals, so it is reported rather than hidden.
func parse(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// checkDeadLetters names the checked promotions whose events may be in the
// dead-letter topic rather than the record: their counters cannot be trusted to
// agree, whatever the comparison said.
func (v *verifier) checkDeadLetters(ctx context.Context, rep *Report) error {
	dead, err := v.d.Record.DeadLettered(ctx)
	if err != nil || len(dead) == 0 {
		return err
	}
	byKey := map[string]int{}
	for id, n := range dead {
		byKey[promo.Key(id.PromoID, id.Type)] = n
	}
	for _, c := range rep.Promotions {
		if n := byKey[c.Key]; n > 0 {
			rep.DeadLetters = append(rep.DeadLetters, Drift{Key: c.Key, Shard: c.Shard, What: "dead letters", Record: int64(n)})
		}
	}
	if n := dead[store.ID{}]; n > 0 {
		rep.DeadLetters = append(rep.DeadLetters, Drift{Key: "(none readable)", Shard: -1, What: "dead letters", Record: int64(n)})
	}
	return nil
}
