// Package rebuild restores lost Redis shards from the system of record: for every
// live promotion of a shard, the promotion hash (remaining = total − Σ GRAB +
// Σ CANCEL), the per-pin and per-ip counters and the request ledger, from the
// promotion table and the flow log; rate windows and the pending set start empty.
//
// Order of a run, and why:
//  1. Fence the shards (markers.go): grab-service answers UNAVAILABLE for their
//     promotions instead of selling from a shard being rewritten.
//  2. Wait Settle: grab-service sees a fence within its poll interval, and grabs that
//     passed the fence before it was raised finish within their answer timeout.
//  3. Wait until the flow sink has stored everything Kafka holds (flowlag): a grant
//     Kafka acknowledged but MySQL does not hold yet would otherwise be lost. If
//     that cannot be confirmed the run refuses, unless forced.
//  4. Per shard: drop its built marker, restore each promotion (staged, then swapped
//     in atomically), write the built marker, lift the fence.
package rebuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/schollz/progressbar/v3"

	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/recovery/internal/flowlag"
)

// Options say what to rebuild and how carefully.
type Options struct {
	// Shards are rebuilt whole; Promo (if set) alone instead, on its shard.
	Shards []int
	Promo  *store.ID
	// Settle is the wait between raising the fences and reading the record.
	Settle time.Duration
	// CatchUp bounds the wait for the flow sink; Force rebuilds even if it was not
	// confirmed (a grant not yet in MySQL is then lost from Redis).
	CatchUp time.Duration
	Force   bool
	// FenceTTL is how long a fence outlives a killed rebuild.
	FenceTTL time.Duration
	// Batch is the most commands per pipeline.
	Batch int
	// Progress receives the progress bar (stderr); nil for none.
	Progress io.Writer
}

// Defaults are safe for production and the local stack alike.
func Defaults() Options {
	return Options{Settle: 3500 * time.Millisecond, CatchUp: time.Minute, FenceTTL: time.Minute, Batch: 300}
}

// Deps are the connections of a run.
type Deps struct {
	Shards []redis.UniversalClient // index = logical shard; 16
	Record Record
	Lag    *flowlag.Meter // nil: the sink's position cannot be read (refused unless forced)
	Log    *slog.Logger
}

// ErrNotCaughtUp is the refusal of step 3.
var ErrNotCaughtUp = errors.New("refusing to rebuild")

// Run rebuilds and reports what it restored. An error after some shards were
// rebuilt still returns their summary.
func Run(ctx context.Context, d Deps, o Options) (Summary, error) {
	start := time.Now()
	sum := Summary{}
	if len(d.Shards) != ring.Shards {
		return sum, fmt.Errorf("rebuild: %d shard clients, want %d", len(d.Shards), ring.Shards)
	}
	if o.Batch < 1 || o.FenceTTL < time.Second {
		return sum, fmt.Errorf("rebuild: batch %d and fence TTL %s must be positive (TTL >= 1s)", o.Batch, o.FenceTTL)
	}
	targets := o.Shards
	if o.Promo != nil {
		targets = []int{ring.Default.Shard(o.Promo.Key())}
	}
	targets = uniqueSorted(targets)
	if len(targets) == 0 {
		return sum, errors.New("rebuild: no shard to rebuild")
	}
	clients := map[int]redis.UniversalClient{}
	for _, s := range targets {
		if s < 0 || s >= ring.Shards {
			return sum, fmt.Errorf("rebuild: shard %d is not in 0..%d", s, ring.Shards-1)
		}
		clients[s] = d.Shards[s]
	}

	f := newFences(clients, o.FenceTTL)
	if err := f.raise(ctx); err != nil {
		return sum, fmt.Errorf("rebuild: %w (the shard's server must answer before it can be rebuilt)", err)
	}
	defer f.stop()
	defer f.lowerAll(context.WithoutCancel(ctx))
	d.Log.Info("shards fenced; waiting for grabs in flight to settle", "shards", targets, "settle", o.Settle.String())
	select {
	case <-ctx.Done():
		return sum, ctx.Err()
	case <-time.After(o.Settle):
	}

	sum.CatchUp = "the flow sink has stored everything Kafka held"
	if err := catchUp(ctx, d.Lag, o.CatchUp); err != nil {
		if !o.Force {
			return sum, fmt.Errorf("%w: could not confirm that the flow sink has stored everything Kafka holds: %v. "+
				"A grant Kafka acknowledged but MySQL lacks would be lost; start or fix the sink (bin/recovery sink), "+
				"or rerun with --force to rebuild from what MySQL holds now", ErrNotCaughtUp, err)
		}
		sum.CatchUp = "NOT CONFIRMED (forced): " + err.Error()
		d.Log.Warn("rebuilding without the flow sink's catch-up confirmed (--force)", "err", err.Error())
	}

	live, err := d.Record.LivePromotions(ctx)
	if err != nil {
		return sum, err
	}
	byShard := map[int][]store.Promotion{}
	for _, p := range live {
		if o.Promo != nil && p.ID() != *o.Promo {
			continue
		}
		if s := ring.Default.Shard(p.ID().Key()); clients[s] != nil {
			byShard[s] = append(byShard[s], p)
		}
	}
	if o.Promo != nil && len(byShard) == 0 {
		return sum, fmt.Errorf("rebuild: the record holds no live promotion %s", o.Promo)
	}
	total := 0
	for _, ps := range byShard {
		total += len(ps)
	}
	bar := newBar(o.Progress, total)

	for _, s := range targets {
		ss, err := rebuildShard(ctx, d, o, s, clients[s], byShard[s], bar)
		sum.Shards = append(sum.Shards, ss)
		sum.Warnings = append(sum.Warnings, ss.warnings...)
		if err != nil {
			return sum, fmt.Errorf("rebuild shard %d: %w", s, err)
		}
		if err := f.lower(ctx, s); err != nil {
			return sum, err
		}
		d.Log.Info("shard rebuilt; fence lifted", "shard", s, "promotions", ss.Promotions, "ledger", ss.Ledger)
	}
	if bar != nil {
		_ = bar.Finish()
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
}

func rebuildShard(ctx context.Context, d Deps, o Options, shard int, c redis.UniversalClient, ps []store.Promotion, bar *progressbar.ProgressBar) (ShardSummary, error) {
	ss := ShardSummary{Shard: shard, Whole: o.Promo == nil}
	if bar != nil {
		bar.Describe(fmt.Sprintf("shard %2d", shard))
	}
	if ss.Whole {
		// Until the last promotion is in, the shard is not whole: if this run dies,
		// grab-service keeps fencing it after the fence's TTL runs out.
		if err := c.Del(ctx, BuiltKey(shard)).Err(); err != nil {
			return ss, fmt.Errorf("drop the built marker: %w", err)
		}
	}
	for _, p := range ps {
		r, err := restorePromotion(ctx, c, d.Record, p, o.Batch)
		if err != nil {
			return ss, err
		}
		ss.add(r)
		if bar != nil {
			_ = bar.Add(1)
		}
	}
	if ss.Whole {
		if err := markBuilt(ctx, c, shard, len(ps)); err != nil {
			return ss, err
		}
	}
	return ss, nil
}

// catchUp waits for the sink; with no Kafka to ask, it says so.
func catchUp(ctx context.Context, lag *flowlag.Meter, timeout time.Duration) error {
	if lag == nil {
		return errors.New("no Kafka brokers configured to ask")
	}
	return lag.WaitCaughtUp(ctx, timeout, 200*time.Millisecond)
}

func newBar(w io.Writer, total int) *progressbar.ProgressBar {
	if w == nil || total == 0 {
		return nil
	}
	return progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("rebuild"),
		progressbar.OptionShowCount(),
		progressbar.OptionSetItsString("promotions"),
		progressbar.OptionShowIts(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
}

func uniqueSorted(in []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, v := range in {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Ints(out)
	return out
}
