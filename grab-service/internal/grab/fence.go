package grab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/shardmark"
	"github.com/flashsale/platform/internal/svc"
)

// The fence keeps grabs and cancels off a shard being rebuilt from MySQL, or that
// lost its data and is not rebuilt yet: a half-built shard could sell what the
// record already granted. Its rule, read from the shard's fence and built markers
// every ~200 ms into one flag per shard: docs/design.md, "The fence's rule, in full".

// errFenced fails a cancel on a fenced shard; the cancel answers UNAVAILABLE.
var errFenced = errors.New("shard fenced while it is rebuilt")

// rollbackReason marks the grab path's own rollback cancel, which must not be fenced:
// it undoes a take that passed the fence before it went up.
const rollbackReason = "ROLLBACK"

// recordCacheTTL bounds how often a missing marker costs a MySQL query.
const recordCacheTTL = time.Second

// Fence is the per-shard fenced state. A nil *Fence fences nothing.
type Fence struct {
	shards []redis.UniversalClient
	keys   func(ctx context.Context) ([]string, error)
	// instance names this process in the shards' serving reports (internal/shardmark).
	instance string
	ring     *ring.Ring
	log      *slog.Logger
	fenced   [ring.Shards]atomic.Bool
	// moves counts each shard's moves to another server (Moved): a marker read
	// begun before a move judges the old server, so its verdict is dropped.
	moves [ring.Shards]atomic.Uint64
	// generation is the shard clients' own count of moves (shardpool.Pool.Generation;
	// nil: none), and judged the generation each shard's last verdict read: a shard
	// whose client moved since is fenced at once, before Moved is told, and a grab
	// whose take ran across a move is undone (grab.go).
	generation func(shard int) uint64
	judged     [ring.Shards]atomic.Uint64
	mu         sync.Mutex
	why        map[int]string
	cache      map[int]bool
	cacheAt    time.Time

	gauge      *prometheus.GaugeVec
	refused    *prometheus.CounterVec
	pollErrors prometheus.Counter
}

// NewFence watches the markers of shards (index = logical shard). keys lists the
// promotion keys the record holds (store.PromotionKeys).
func NewFence(shards []redis.UniversalClient, keys func(ctx context.Context) ([]string, error), reg prometheus.Registerer, log *slog.Logger) *Fence {
	const ns, sub = "flashsale", "grab"
	f := &Fence{
		shards: shards, keys: keys, instance: shardmark.Instance("grab-service"), ring: ring.Default, log: log, why: map[int]string{},
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "shard_fenced", Help: "1 while the shard is fenced (being rebuilt, or lost and not rebuilt)."}, []string{"shard"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "fence_refusals_total", Help: "Grabs and cancels answered UNAVAILABLE because their shard was fenced."}, []string{"shard", "op"}),
		pollErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "fence_poll_errors_total", Help: "Marker reads that failed (the shard keeps its last state)."}),
	}
	reg.MustRegister(f.gauge, f.refused, f.pollErrors)
	for i := range shards {
		f.gauge.WithLabelValues(strconv.Itoa(i)).Set(0)
	}
	return f
}

// FollowGenerations makes the fence judge each shard for the server its client
// dials now (shardpool.Pool.Generation): a verdict read before the client moved
// does not hold after.
func (f *Fence) FollowGenerations(generation func(shard int) uint64) {
	if f == nil {
		return
	}
	for shard := range f.shards {
		f.judged[shard].Store(generation(shard))
	}
	f.generation = generation
}

// Fenced reports whether shard is fenced now.
func (f *Fence) Fenced(shard int) bool {
	return f != nil && shard >= 0 && shard < ring.Shards && (f.fenced[shard].Load() || f.gen(shard) != f.judged[shard].Load())
}

// gen is shard's client generation (0 when the fence follows none).
func (f *Fence) gen(shard int) uint64 {
	if f == nil || f.generation == nil {
		return 0
	}
	return f.generation(shard)
}

// Run polls at once and then every interval until ctx ends.
func (f *Fence) Run(ctx context.Context, every time.Duration) error {
	return svc.Every(ctx, every, func(ctx context.Context) { f.Poll(ctx, every*4) })
}

// Poll reads every shard's markers once, all shards at once, each within timeout.
func (f *Fence) Poll(ctx context.Context, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var wg sync.WaitGroup
	for shard := range f.shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.pollShard(ctx, shard)
		}()
	}
	wg.Wait()
}

func (f *Fence) pollShard(ctx context.Context, shard int) {
	c := f.shards[shard]
	move, gen := f.moves[shard].Load(), f.gen(shard)
	st, err := shardmark.Read(ctx, c, shard)
	if err != nil {
		f.pollErrors.Inc()
		return
	}
	if f.moves[shard].Load() != move || f.gen(shard) != gen || !f.judge(ctx, shard, c, st) {
		return
	}
	f.judged[shard].Store(gen)
	// After the flag is set: a rebuild waiting for this report returns at once.
	if err := shardmark.Report(ctx, c, shard, f.instance, st.ServerTime, !f.Fenced(shard)); err != nil {
		f.pollErrors.Inc()
	}
}

// judge sets shard's state from its markers; false if it could not be decided.
func (f *Fence) judge(ctx context.Context, shard int, c redis.UniversalClient, st shardmark.Status) bool {
	switch {
	case st.Rebuilding:
		f.set(shard, "rebuild in progress")
	case st.Built == shardmark.Whole:
		f.set(shard, "")
	default: // Missing or Moved: whole only if the record holds nothing of the shard
		lost := "lost and not rebuilt: no built marker"
		if st.Built == shardmark.Moved {
			lost = fmt.Sprintf("the server (run_id %s) holds the built marker of another (run_id %s): a replica promoted in a failover, "+
				"which may lack the last acknowledged writes", st.ServerRunID, st.MarkerRunID)
		}
		has, err := f.recordHas(ctx, shard)
		switch {
		case err != nil:
			f.set(shard, lost+", and the record cannot tell whether the shard held promotions: "+err.Error())
		case has:
			f.set(shard, fmt.Sprintf("%s, and the record holds promotions of this shard (run bin/recovery rebuild --shard %d)", lost, shard))
		default:
			if err := shardmark.MarkBuilt(ctx, c, shard, "grab-service", 0, st.Built == shardmark.Missing); err != nil {
				f.pollErrors.Inc()
				return false
			}
			f.set(shard, "")
		}
	}
	return true
}

// Moved fences shards whose client now dials another server (the config center
// moved them, shardpool.Pool.Move) until a marker read of the new server decides,
// which it starts at once: a promoted replica holds its old master's built marker,
// so it stays fenced until rebuilt (bin/recovery rebuild --missing).
func (f *Fence) Moved(shards []int, addr func(shard int) string) {
	if f == nil {
		return
	}
	for _, shard := range shards {
		f.moves[shard].Add(1)
		f.set(shard, fmt.Sprintf("moved to %s (by the sentinels or on-call); reading its markers", addr(shard)))
	}
	for _, shard := range shards {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			f.pollShard(ctx, shard)
		}()
	}
}

// recordHas reports whether the record holds a promotion of shard (cached briefly).
func (f *Fence) recordHas(ctx context.Context, shard int) (bool, error) {
	f.mu.Lock()
	if f.cache != nil && time.Since(f.cacheAt) < recordCacheTTL {
		has := f.cache[shard]
		f.mu.Unlock()
		return has, nil
	}
	f.mu.Unlock()
	keys, err := f.keys(ctx)
	if err != nil {
		return false, err
	}
	cache := map[int]bool{}
	for _, k := range keys {
		cache[f.ring.Shard(k)] = true
	}
	f.mu.Lock()
	f.cache, f.cacheAt = cache, time.Now()
	f.mu.Unlock()
	return cache[shard], nil
}

// set records the state; why == "" opens the shard. Changes are logged.
func (f *Fence) set(shard int, why string) {
	on := why != ""
	was := f.fenced[shard].Swap(on)
	f.mu.Lock()
	if on {
		f.why[shard] = why
	} else {
		delete(f.why, shard)
	}
	f.mu.Unlock()
	if was != on {
		if on {
			f.log.Warn("shard fenced: its grabs and cancels answer UNAVAILABLE", "shard", shard, "why", why)
			f.gauge.WithLabelValues(strconv.Itoa(shard)).Set(1)
		} else {
			f.log.Info("shard fence lifted", "shard", shard)
			f.gauge.WithLabelValues(strconv.Itoa(shard)).Set(0)
		}
	}
}

// FencedShard is one fenced shard as /readyz shows it.
type FencedShard struct {
	Shard int    `json:"shard"`
	Why   string `json:"why"`
}

// Status lists the fenced shards.
func (f *Fence) Status() []FencedShard {
	out := []FencedShard{}
	if f == nil {
		return out
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for s, why := range f.why {
		out = append(out, FencedShard{s, why})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Shard < out[j].Shard })
	return out
}
