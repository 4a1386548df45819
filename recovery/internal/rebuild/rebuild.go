// Package rebuild restores lost Redis shards from the system of record: for every
// live promotion of a shard, the promotion hash (remaining = total − Σ GRAB +
// Σ CANCEL), the per-pin and per-ip counters and the request ledger, from the
// promotion table and the flow log; rate windows and the pending set start empty.
// A promotion in K buckets (internal/bucket) is K hashes on K shards: a shard
// restores the bucket it holds, its share of the total less what its GRAB rows
// took, the pins and ips whose home it is, and the ledger entries of the parts it
// held (bucket.go). An envelope pool is restored exactly: its sorted set of the
// parts no grab holds, envAmount, envLeft and envDigest, and ledger entries naming the parts
// each grab took, the held parts counted from the rows that build the ledger
// (promotion.go).
//
// Order of a run, and why:
//  1. Fence the shards (markers.go): grab-service answers UNAVAILABLE for their
//     promotions instead of selling from a shard being rewritten.
//  2. Wait Settle: grab-service sees a fence within its poll interval, and grabs that
//     passed the fence before it was raised finish within their answer timeout.
//     Then wait until no admin change of the shards' promotions can still be
//     promoted by the promo-admin request that made it (AdminGrace after it was
//     recorded): a patch whose script reached the hash just before the fence,
//     promoted in MySQL after the record was read, would be overwritten by the older
//     row. A change older than that is the repairer's, which resolves it against the
//     rebuilt hash. Under the fence no new change lands.
//  3. Wait until no take of the shards' promotions is open (their pending sets are
//     empty): grab-service's reconciler settles takes left pending and pays the
//     CANCELs owed by aborts and cancels, which live only in Redis until then. A lost
//     shard has none. If they do not drain the run refuses, unless forced.
//  4. Wait until the flow sink has stored everything Kafka holds (flowlag): a grant
//     Kafka acknowledged but MySQL does not hold yet would otherwise be lost. If
//     that cannot be confirmed the run refuses, unless forced. Then write into the
//     flow log the owed CANCELs whose GRAB is there now (store.SettleOwedCancels):
//     a debt a lost shard took along is not restored as a grant.
//  5. Per shard: drop its built marker, restore each promotion (staged, then swapped
//     in atomically), write the built marker, lift the fence.
//  6. Wait until every live grab-service instance reports serving the shards again
//     (internal/shardmark's serving reports), so the exit means sales are back.
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
		var err error
		if targets, err = promoShards(ctx, d.Record, *o.Promo); err != nil {
			return sum, err
		}
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
	// Before the first read: a create promoted meanwhile must have its takes drained.
	if err := awaitAdminChanges(ctx, d, o.Promo, clients, o.AdminGrace); err != nil {
		return sum, err
	}

	live, err := d.Record.LivePromotions(ctx)
	if err != nil {
		return sum, err
	}
	if err := drain(ctx, clients, pick(live, o.Promo, clients), o.Drain); err != nil {
		if !o.Force {
			return sum, fmt.Errorf("%w: %v. Their outcome lives only in Redis until grab-service's reconciler settles them; "+
				"make sure grab-service runs, or rerun with --force to rebuild them from what MySQL holds", ErrRefused, err)
		}
		sum.Warnings = append(sum.Warnings, "forced past open takes: "+err.Error())
		d.Log.Warn("rebuilding over open takes (--force)", "err", err.Error())
	}

	sum.CatchUp = "the flow sink has stored everything Kafka held"
	if err := catchUp(ctx, d.Lag, o.CatchUp); err != nil {
		if !o.Force {
			return sum, fmt.Errorf("%w: could not confirm that the flow sink has stored everything Kafka holds: %v. "+
				"A grant Kafka acknowledged but MySQL lacks would be lost; start or fix the sink (bin/recovery sink), "+
				"or rerun with --force to rebuild from what MySQL holds now", ErrRefused, err)
		}
		sum.CatchUp = "NOT CONFIRMED (forced): " + err.Error()
		d.Log.Warn("rebuilding without the flow sink's catch-up confirmed (--force)", "err", err.Error())
	}

	if sum.OwedSettled, err = d.Record.SettleOwedCancels(ctx, store.OwedKeep); err != nil {
		return sum, err
	}

	// Read again: what the drain settled reached MySQL only now.
	if live, err = d.Record.LivePromotions(ctx); err != nil {
		return sum, err
	}
	byShard := pick(live, o.Promo, clients)
	if o.Promo != nil && len(byShard) == 0 {
		return sum, fmt.Errorf("rebuild: the record holds no live promotion %s", o.Promo)
	}
	total := 0
	for _, ts := range byShard {
		total += len(ts)
	}
	bar := progress.New(o.Progress, total, "rebuild", "promotions")

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
		d.Log.Debug("shard rebuilt; fence lifted", "shard", s, "promotions", ss.Promotions, "ledger", ss.Ledger)
	}
	if bar != nil {
		_ = bar.Finish()
	}
	for i := range sum.Shards {
		ss := &sum.Shards[i]
		served, err := shardmark.AwaitServing(ctx, clients[ss.Shard], ss.Shard, o.ServeTimeout, servePoll)
		ss.ServedBy = len(served)
		if err != nil {
			sum.Elapsed = time.Since(start)
			return sum, fmt.Errorf("%w: %v", ErrNotServed, err)
		}
	}
	sum.Elapsed = time.Since(start)
	return sum, nil
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
			held, err = restoreHolds(ictx, c, d.Record, shard, o.Batch, now)
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
