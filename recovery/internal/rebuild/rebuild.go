// Package rebuild restores lost Redis shards from the system of record: for every
// live promotion of a shard, the promotion hash (remaining = total − Σ GRAB +
// Σ CANCEL), the per-pin and per-ip counters and the request ledger, from the
// promotion table and the flow log; a bucket of a bucketed promotion (bucket.go)
// and an envelope pool's parts (promotion.go) exactly. Rate windows and the
// pending set start empty. A run fences the shards, waits for what is in flight
// to reach the record, restores each shard and waits until it is served again
// (Run); why each step: docs/design.md, "Record and recovery".
package rebuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/schollz/progressbar/v3"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/shardmark"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/recovery/internal/flowlag"
	"github.com/flashsale/platform/recovery/internal/progress"
)

// Options say what to rebuild and how carefully.
type Options struct {
	// Shards are rebuilt whole; Promo (if set) alone instead, on its shard (every
	// bucket's shard for a bucketed promotion).
	Shards []int
	Promo  *store.ID
	// Settle is the wait between raising the fences and reading the record.
	Settle time.Duration
	// Drain bounds the wait for open takes to settle, CatchUp the wait for the flow
	// sink. Force rebuilds even if either was not confirmed (an open take or a grant
	// not yet in MySQL is then lost from Redis).
	Drain   time.Duration
	CatchUp time.Duration
	Force   bool
	// IgnoreDeadLetters rebuilds promotions with events in the dead-letter topic
	// not replayed yet (refused otherwise: refuseDeadLettered).
	IgnoreDeadLetters bool
	// FenceTTL is how long a fence outlives a killed rebuild.
	FenceTTL time.Duration
	// AdminGrace is how long after it was recorded an admin change may still be
	// promoted by its request: promo-admin's RepairGrace plus clock skew.
	AdminGrace time.Duration
	// Batch is the most commands per pipeline.
	Batch int
	// ServeTimeout bounds the wait, after the fences are lifted, for every live
	// grab-service instance to serve the shards again.
	ServeTimeout time.Duration
	// Progress receives the progress bar (stderr); nil for none.
	Progress io.Writer
}

// Defaults are safe for production and the local stack alike.
func Defaults() Options {
	return Options{Settle: 3500 * time.Millisecond, Drain: 15 * time.Second, CatchUp: time.Minute, FenceTTL: time.Minute,
		AdminGrace: 17 * time.Second, Batch: 300, ServeTimeout: 10 * time.Second}
}

// Deps are the connections of a run.
type Deps struct {
	Shards []redis.UniversalClient // index = logical shard; 16
	Record Record
	Flows  FlowLog
	Lag    *flowlag.Meter // nil: the sink's position cannot be read (refused unless forced)
	Log    *slog.Logger
}

// ErrRefused is the refusal of steps 3 and 4.
var ErrRefused = errors.New("refusing to rebuild")

// ErrNotServed is step 6's failure: the shards are rebuilt and open, but some
// grab-service instance still refuses them.
var ErrNotServed = errors.New("rebuilt, but not served again")

// servePoll is how often step 6 reads the serving reports.
const servePoll = 10 * time.Millisecond

// Run rebuilds and reports what it restored. An error after some shards were
// rebuilt still returns their summary.
func Run(ctx context.Context, d Deps, o Options) (Summary, error) {
	r := &rebuildRun{d: d, o: o, start: time.Now()}
	err := r.run(ctx)
	return r.sum, err
}

// rebuildRun is one run of Run: its shards and what it reports.
type rebuildRun struct {
	d       Deps
	o       Options
	start   time.Time
	targets []int
	clients map[int]redis.UniversalClient
	sum     Summary
}

// run takes the steps in order: fence the shards, let what is in flight settle,
// confirm the record holds it, restore each shard and lift its fence, and wait
// until every grab-service instance serves the shards again.
func (r *rebuildRun) run(ctx context.Context) error {
	if err := r.pickShards(ctx); err != nil {
		return err
	}
	if err := r.refuseDeadLettered(ctx); err != nil {
		return err
	}
	f := newFences(r.clients, r.o.FenceTTL)
	if err := f.raise(ctx); err != nil {
		return fmt.Errorf("rebuild: %w (the shard's server must answer before it can be rebuilt)", err)
	}
	defer f.stop()
	defer f.lowerAll(context.WithoutCancel(ctx))
	if err := r.settle(ctx); err != nil {
		return err
	}
	if err := r.drainTakes(ctx); err != nil {
		return err
	}
	if err := r.catchUpSink(ctx); err != nil {
		return err
	}
	var err error
	if r.sum.OwedSettled, err = r.d.Flows.SettleOwedCancels(ctx, store.OwedKeep); err != nil {
		return err
	}
	if err := r.rebuildShards(ctx, f); err != nil {
		return err
	}
	return r.awaitServed(ctx)
}

// pickShards checks the options and names the shards to rebuild and their clients.
func (r *rebuildRun) pickShards(ctx context.Context) error {
	d, o := r.d, r.o
	if len(d.Shards) != ring.Shards {
		return fmt.Errorf("rebuild: %d shard clients, want %d", len(d.Shards), ring.Shards)
	}
	if o.Batch < 1 || o.FenceTTL < time.Second {
		return fmt.Errorf("rebuild: batch %d and fence TTL %s must be positive (TTL >= 1s)", o.Batch, o.FenceTTL)
	}
	targets := o.Shards
	if o.Promo != nil {
		var err error
		if targets, err = promoShards(ctx, d.Record, *o.Promo); err != nil {
			return err
		}
	}
	r.targets = uniqueSorted(targets)
	if len(r.targets) == 0 {
		return errors.New("rebuild: no shard to rebuild")
	}
	r.clients = map[int]redis.UniversalClient{}
	for _, s := range r.targets {
		if s < 0 || s >= ring.Shards {
			return fmt.Errorf("rebuild: shard %d is not in 0..%d", s, ring.Shards-1)
		}
		r.clients[s] = d.Shards[s]
	}
	return nil
}

// settle waits, once the shards are fenced, for grabs in flight to finish and for
// every admin change of the shards that its request may still promote.
func (r *rebuildRun) settle(ctx context.Context) error {
	r.d.Log.Info("shards fenced; waiting for grabs in flight to settle", "shards", r.targets, "settle", r.o.Settle.String())
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(r.o.Settle):
	}
	// Before the first read: a create promoted meanwhile must have its takes drained.
	return awaitAdminChanges(ctx, r.d, r.o.Promo, r.clients, r.o.AdminGrace)
}

// drainTakes waits until no take of the shards' promotions is open; it refuses
// when some stay open, unless forced.
func (r *rebuildRun) drainTakes(ctx context.Context) error {
	live, err := r.d.Record.LivePromotions(ctx)
	if err != nil {
		return err
	}
	err = drain(ctx, r.clients, pick(live, r.o.Promo, r.clients), r.o.Drain)
	if err == nil {
		return nil
	}
	if !r.o.Force {
		return fmt.Errorf("%w: %v. Their outcome lives only in Redis until grab-service's reconciler settles them; "+
			"make sure grab-service runs, or rerun with --force to rebuild them from what MySQL holds", ErrRefused, err)
	}
	r.sum.Warnings = append(r.sum.Warnings, "forced past open takes: "+err.Error())
	r.d.Log.Warn("rebuilding over open takes (--force)", "err", err.Error())
	return nil
}

// catchUpSink waits until the flow sink has stored everything Kafka holds; it
// refuses when that cannot be confirmed, unless forced.
func (r *rebuildRun) catchUpSink(ctx context.Context) error {
	r.sum.CatchUp = "the flow sink has stored everything Kafka held"
	err := catchUp(ctx, r.d.Lag, r.o.CatchUp)
	if err == nil {
		return nil
	}
	if !r.o.Force {
		return fmt.Errorf("%w: could not confirm that the flow sink has stored everything Kafka holds: %v. "+
			"A grant Kafka acknowledged but MySQL lacks would be lost; start or fix the sink (bin/recovery sink), "+
			"or rerun with --force to rebuild from what MySQL holds now", ErrRefused, err)
	}
	r.sum.CatchUp = "NOT CONFIRMED (forced): " + err.Error()
	r.d.Log.Warn("rebuilding without the flow sink's catch-up confirmed (--force)", "err", err.Error())
	return nil
}

// rebuildShards restores the shards one by one, lifting each one's fence once
// it is whole.
func (r *rebuildRun) rebuildShards(ctx context.Context, f *fences) error {
	// Read again: what the drain settled reached MySQL only now.
	live, err := r.d.Record.LivePromotions(ctx)
	if err != nil {
		return err
	}
	byShard := pick(live, r.o.Promo, r.clients)
	if r.o.Promo != nil && len(byShard) == 0 {
		return fmt.Errorf("rebuild: the record holds no live promotion %s", r.o.Promo)
	}
	total := 0
	for _, ts := range byShard {
		total += len(ts)
	}
	bar := progress.New(r.o.Progress, total, "rebuild", "promotions")
	for _, s := range r.targets {
		ss, err := rebuildShard(ctx, r.d, r.o, s, r.clients[s], byShard[s], bar)
		r.sum.Shards = append(r.sum.Shards, ss)
		r.sum.Warnings = append(r.sum.Warnings, ss.warnings...)
		if err != nil {
			return fmt.Errorf("rebuild shard %d: %w", s, err)
		}
		if err := f.lower(ctx, s); err != nil {
			return err
		}
		r.d.Log.Debug("shard rebuilt; fence lifted", "shard", s, "promotions", ss.Promotions, "ledger", ss.Ledger)
	}
	if bar != nil {
		_ = bar.Finish()
	}
	return nil
}

// awaitServed waits until every live grab-service instance reports serving the
// rebuilt shards, so the exit means sales are back.
func (r *rebuildRun) awaitServed(ctx context.Context) error {
	for i := range r.sum.Shards {
		ss := &r.sum.Shards[i]
		served, err := shardmark.AwaitServing(ctx, r.clients[ss.Shard], ss.Shard, r.o.ServeTimeout, servePoll)
		ss.ServedBy = len(served)
		if err != nil {
			r.sum.Elapsed = time.Since(r.start)
			return fmt.Errorf("%w: %v", ErrNotServed, err)
		}
	}
	r.sum.Elapsed = time.Since(r.start)
	return nil
}

func rebuildShard(ctx context.Context, d Deps, o Options, shard int, c redis.UniversalClient, ts []target, bar *progressbar.ProgressBar) (ShardSummary, error) {
	ss := ShardSummary{Shard: shard, Whole: o.Promo == nil}
	if bar != nil {
		bar.Describe(fmt.Sprintf("shard %2d", shard))
	}
	if !ss.Whole {
		return ss, restorePromotions(ctx, d, o, c, ts, bar, &ss)
	}
	// Until the last promotion is in, the shard is not whole: if this run dies,
	// grab-service keeps fencing it after the fence's TTL runs out.
	if err := c.Del(ctx, promo.BuiltKey(shard)).Err(); err != nil {
		return ss, fmt.Errorf("drop the built marker: %w", err)
	}
	// The request index entries and their open holds are keys of their own: restored
	// alongside the promotions, so the reads of the record overlap.
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	var indexed, held int
	index := make(chan error, 1)
	go func() {
		var err error
		now := time.Now()
		indexed, err = restoreIndex(ictx, c, d.Record, shard, o.Batch, now)
		if err == nil {
			held, err = restoreHolds(ictx, c, d.Flows, shard, o.Batch, now)
		}
		index <- err
	}()
	err := restorePromotions(ctx, d, o, c, ts, bar, &ss)
	if err != nil {
		cancel()
	}
	ierr := <-index
	ss.Index, ss.Holds = indexed, held
	if err := errors.Join(err, ierr); err != nil {
		return ss, err
	}
	return ss, markBuilt(ctx, c, shard, len(ts))
}

func restorePromotions(ctx context.Context, d Deps, o Options, c redis.UniversalClient, ts []target, bar *progressbar.ProgressBar, ss *ShardSummary) error {
	for _, t := range ts {
		var rowsRead func(int)
		if bar != nil { // the bar counts promotions; the description, the rows of this one
			key := t.key()
			rowsRead = func(n int) { bar.Describe(fmt.Sprintf("shard %2d %s: %d flow rows", ss.Shard, key, n)) }
		}
		r, err := restorePromotion(ctx, c, d.Record, t, o.Batch, rowsRead)
		if err != nil {
			return err
		}
		ss.add(r)
		if bar != nil {
			_ = bar.Add(1)
		}
	}
	return nil
}

// pick groups by shard the promotions to rebuild: every bucket that lives on a
// shard being rebuilt.
func pick(live []store.Promotion, only *store.ID, clients map[int]redis.UniversalClient) map[int][]target {
	out := map[int][]target{}
	for _, p := range live {
		if only != nil && p.ID() != *only {
			continue
		}
		for _, t := range targets(p) {
			if s := t.shard(); clients[s] != nil {
				out[s] = append(out[s], t)
			}
		}
	}
	return out
}

// promoShards are the shards of the promotion's buckets, for a rebuild of it
// alone. Its bucket count is fixed at create, so reading it before the fence is
// safe; a promotion the record does not hold live is looked for on its key's
// shard, and refused there once the record is read under the fence.
func promoShards(ctx context.Context, rec Record, id store.ID) ([]int, error) {
	live, err := rec.LivePromotions(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range live {
		if p.ID() == id {
			return layoutOf(id, p.Spec.Buckets).Shards, nil
		}
	}
	return []int{ring.Default.Shard(id.Key())}, nil
}

// drain waits until every bucket's pending set is empty, or says which are not.
func drain(ctx context.Context, clients map[int]redis.UniversalClient, byShard map[int][]target, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var open []string
		for s, ts := range byShard {
			for _, t := range ts {
				key := t.key()
				n, err := clients[s].ZCard(ctx, promo.PendingKey(key)).Result()
				if err != nil {
					return fmt.Errorf("read the open takes of %s: %w", key, err)
				}
				if n > 0 {
					open = append(open, fmt.Sprintf("%s: %d", key, n))
				}
			}
		}
		if len(open) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			sort.Strings(open)
			return fmt.Errorf("takes still open after %s (%s)", timeout, strings.Join(open, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// awaitAdminChanges waits until every pending admin change of the shards'
// promotions is older than grace (or gone): none can then be promoted by its
// request after the record is read. Under the fence a new change is refused.
func awaitAdminChanges(ctx context.Context, d Deps, only *store.ID, clients map[int]redis.UniversalClient, grace time.Duration) error {
	logged := false
	for {
		changes, err := d.Record.PendingChanges(ctx)
		if err != nil {
			return err
		}
		var youngest *store.PendingChange
		for i, c := range changes {
			if (only != nil && c.ID != *only) || !onAny(layoutOf(c.ID, c.Buckets).Shards, clients) {
				continue
			}
			if youngest == nil || c.At.After(youngest.At) {
				youngest = &changes[i]
			}
		}
		if youngest == nil || time.Since(youngest.At) >= grace {
			return nil
		}
		if !logged {
			d.Log.Info("waiting for an admin change in flight to be promoted or discarded", "promotion", youngest.ID.String(),
				"pendingSince", youngest.At, "grace", grace.String())
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// onAny says whether any of shards is being rebuilt: a change of a bucketed
// promotion reaches every bucket.
func onAny(shards []int, clients map[int]redis.UniversalClient) bool {
	for _, s := range shards {
		if clients[s] != nil {
			return true
		}
	}
	return false
}

// catchUp waits for the sink; with no Kafka to ask, it says so.
func catchUp(ctx context.Context, lag *flowlag.Meter, timeout time.Duration) error {
	if lag == nil {
		return errors.New("no Kafka brokers configured to ask")
	}
	return lag.WaitCaughtUp(ctx, timeout, 200*time.Millisecond)
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
