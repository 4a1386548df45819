// Package verify compares every live promotion's Redis counters with the system of
// record (invariant 4): remaining against total − Σ GRAB + Σ CANCEL, and every
// per-pin and per-ip counter against its flow-log net. It is fit to run as a
// periodic job: one summary line and exit 0 when clean, one line per drift and
// exit 1 otherwise.
//
// A live sale must not raise false alarms, so:
//   - a promotion with takes still open (its pending set is not empty: P, A or C
//     ledger entries) is reported "in flight" and not compared;
//   - before comparing, verify waits for the flow sink to store what Kafka holds;
//   - a promotion that differs is checked again (Rechecks times) and reported only
//     if it still differs: a grant between the Redis and the MySQL read is not drift.
package verify

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/recovery/internal/flowlag"
	"github.com/flashsale/platform/recovery/internal/progress"
)

// Record is what verify reads from the system of record (*store.Store).
type Record interface {
	LivePromotions(ctx context.Context) ([]store.Promotion, error)
	FlowCounters(ctx context.Context, id store.ID) (store.FlowCounters, error)
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
// the entries present and due on the shard, Who one of the missing keys.
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
	case "remaining":
		return fmt.Sprintf("DRIFT  %s  shard %d  remaining  redis=%d  record=%d", d.Key, d.Shard, d.Redis, d.Record)
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
}

// Drifts lists every drift found.
func (r Report) Drifts() []Drift {
	var out []Drift
	for _, p := range r.Promotions {
		out = append(out, p.Drifts...)
	}
	return append(out, r.IndexDrifts...)
}

// Run checks every live promotion of the chosen shards.
func Run(ctx context.Context, d Deps, o Options) (Report, error) {
	rep := Report{Shards: o.Shards, CatchUp: "confirmed"}
	if len(d.Shards) != ring.Shards {
		return rep, fmt.Errorf("verify: %d shard clients, want %d", len(d.Shards), ring.Shards)
	}
	want := map[int]bool{}
	for _, s := range o.Shards {
		if s < 0 || s >= ring.Shards {
			return rep, fmt.Errorf("verify: shard %d is not in 0..%d", s, ring.Shards-1)
		}
		want[s] = true
	}
	waitSink := func() string {
		if d.Lag == nil {
			return "not checked (no Kafka brokers configured)"
		}
		if err := d.Lag.WaitCaughtUp(ctx, o.CatchUp, 200*time.Millisecond); err != nil {
			d.Log.Warn("flow sink catch-up not confirmed; drifts may be sink lag", "err", err.Error())
			return "NOT CONFIRMED: " + err.Error()
		}
		return "confirmed"
	}
	rep.CatchUp = waitSink()
	live, err := d.Record.LivePromotions(ctx)
	if err != nil {
		return rep, err
	}
	var mine []store.Promotion
	for _, p := range live {
		if len(want) == 0 || want[ring.Default.Shard(p.ID().Key())] {
			mine = append(mine, p)
		}
	}
	bar := progress.New(o.Progress, len(mine), "verify", "promotions")
	for _, p := range mine {
		shard := ring.Default.Shard(p.ID().Key())
		c, err := check(ctx, d.Shards[shard], d.Record, p, shard)
		for n := 0; err == nil && len(c.Drifts) > 0 && n < o.Rechecks; n++ {
			select {
			case <-ctx.Done():
				return rep, ctx.Err()
			case <-time.After(o.RecheckDelay):
			}
			waitSink()
			c, err = check(ctx, d.Shards[shard], d.Record, p, shard)
		}
		if err != nil {
			return rep, err
		}
		rep.Promotions = append(rep.Promotions, c)
		if bar != nil {
			_ = bar.Add(1)
		}
	}
	if o.Index {
		rep.IndexChecked = true
		var shards []int
		for s := range ring.Shards {
			if len(want) == 0 || want[s] {
				shards = append(shards, s)
			}
		}
		bar := progress.New(o.Progress, len(shards), "verify the request index", "shards")
		for _, s := range shards {
			drift, err := checkIndex(ctx, d.Shards[s], d.Record, s, time.Now())
			if err != nil {
				return rep, err
			}
			if drift != nil {
				rep.IndexDrifts = append(rep.IndexDrifts, *drift)
			}
			if bar != nil {
				_ = bar.Add(1)
			}
		}
	}
	return rep, nil
}

// check reads the promotion's Redis counters in one transaction (a consistent
// snapshot) and compares them with the flow log.
func check(ctx context.Context, c redis.UniversalClient, rec Record, p store.Promotion, shard int) (Checked, error) {
	key := p.ID().Key()
	out := Checked{Key: key, Shard: shard, Total: p.Spec.Total}
	var hash, pins, ips *redis.MapStringStringCmd
	var open *redis.IntCmd
	_, err := c.TxPipelined(ctx, func(pp redis.Pipeliner) error {
		hash = pp.HGetAll(ctx, key)
		pins = pp.HGetAll(ctx, promo.PinsKey(key))
		ips = pp.HGetAll(ctx, promo.IPsKey(key))
		open = pp.ZCard(ctx, promo.PendingKey(key))
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("verify: read %s on shard %d: %w", key, shard, err)
	}
	counters, err := rec.FlowCounters(ctx, p.ID())
	if err != nil {
		return out, err
	}
	wantRemaining := p.Spec.Total - counters.Net()
	h := hash.Val()
	if len(h) == 0 {
		out.Drifts = append(out.Drifts, Drift{Key: key, Shard: shard, What: "promotion", Record: wantRemaining})
		return out, nil
	}
	out.Remaining = parse(h["remaining"])
	out.Pins, out.IPs = len(pins.Val()), len(ips.Val())
	if out.Open = open.Val(); out.Open > 0 {
		return out, nil
	}
	if out.Remaining != wantRemaining {
		out.Drifts = append(out.Drifts, Drift{Key: key, Shard: shard, What: "remaining", Redis: out.Remaining, Record: wantRemaining})
	}
	out.Drifts = append(out.Drifts, compare(key, shard, "pin", pins.Val(), counters.Pins)...)
	out.Drifts = append(out.Drifts, compare(key, shard, "ip", ips.Val(), counters.IPs)...)
	return out, nil
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
