package grab

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/expiry"
	"github.com/flashsale/platform/internal/fault"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
)

// Record is the system of record as the grab path consults it: whether a GRAB
// reached the flow log (the reconciler's back-query), and a granted request's items
// (the cancel path's fallback when the request index in Redis is gone).
type Record interface {
	Granted(ctx context.Context, requestID, promoID string, typ int) (bool, error)
	GrabItems(ctx context.Context, requestID string) (pin, ip string, items []flow.Item, err error)
}

// Config tunes the service; Defaults are the contract's numbers.
type Config struct {
	// AnswerTimeout bounds a grab or cancel end to end (the contract's 3 s).
	AnswerTimeout time.Duration
	// ReconcileMargin is how long past its answer deadline a take may stay open
	// before the reconciler settles it; it covers clock skew between instances
	// and a Kafka write still being retried.
	ReconcileMargin time.Duration
	// RefusalTTL bounds how stale a locally cached SOLD_OUT/STOPPED/ENDED/NOT_FOUND may be.
	RefusalTTL time.Duration
	// StatusTTL is the life of a cached status answer.
	StatusTTL time.Duration
	// RefusalCacheSize and StatusCacheSize bound the entries of the two caches,
	// which are keyed by promotions clients name (cache.go); CacheSweepEvery is how
	// often their lapsed entries are dropped when nothing else drops them.
	RefusalCacheSize, StatusCacheSize int
	CacheSweepEvery                   time.Duration
	// StatusRate bounds the shard reads per second the status route makes for
	// answers not in its cache, past which it answers 429 (status.go); 0: no bound.
	StatusRate float64
	// RedisTimeout bounds one pipeline round trip.
	RedisTimeout time.Duration
	// ReconcileMatch is the SCAN pattern of the pending sets a reconciler sweep
	// visits: every promotion by default; narrower to confine it to some promotions.
	ReconcileMatch string
	// ReconcileSweepEvery is how often a reconciler pass sweeps each shard's whole
	// keyspace (SCAN) rather than visiting the pending sets of the promotions the
	// record lists (Deps.PromotionKeys): a sweep's cost grows with every key of the
	// shard, the request index's month of entries included (reconcile.go).
	ReconcileSweepEvery time.Duration
	// FoldClaim lets a grab whose requestId's index entry is on its one shard be
	// claimed by its take's own q.lua call (claim.go, foldsClaim).
	FoldClaim bool
	// Workers per shard, calls per pipeline, and the bounded queue in front of them.
	Workers, MaxBatch, Queue int
	// CommitLinger is the longest a commit waits for a take of its promotions on
	// its shard to ride (park.go); 0 sends it in the shard's next pipeline.
	CommitLinger time.Duration
	// HoldsKey is the sorted set of held grants on each shard (holds.go); tests
	// that share the shards keep their own.
	HoldsKey string
	// StateOutboxKey is the state outbox on each shard (lua/state.lua); tests that
	// share the shards keep their own.
	StateOutboxKey string
}

// Defaults are sized for the local stack and the contract.
func Defaults() Config {
	return Config{
		AnswerTimeout:       3 * time.Second,
		ReconcileMargin:     5 * time.Second,
		RefusalTTL:          500 * time.Millisecond,
		StatusTTL:           500 * time.Millisecond,
		RefusalCacheSize:    DefaultRefusalCacheSize,
		StatusCacheSize:     DefaultStatusCacheSize,
		CacheSweepEvery:     time.Second,
		StatusRate:          DefaultStatusRate,
		RedisTimeout:        time.Second,
		ReconcileMatch:      promo.PendingKey("C_*"),
		ReconcileSweepEvery: 10 * time.Minute,
		FoldClaim:           true,
		Workers:             4,
		MaxBatch:            64,
		Queue:               4096,
		CommitLinger:        time.Millisecond,
		HoldsKey:            promo.HoldsKey,
		StateOutboxKey:      promo.StateOutboxKey,
	}
}

// Deps are what the service is built from; main wires them.
type Deps struct {
	Shards    []redis.UniversalClient // index = logical shard; len 16
	Publisher Publisher
	Record    Record
	Switches  *configcenter.Holder
	Metrics   *Metrics
	Logger    *slog.Logger
	Clock     func() time.Time
	// Fault, when set (tests only), is called at named points of the grab path (and
	// the reconciler's "reconcile-commit"); an error stops it right there, as a
	// killed process would.
	Fault fault.Hook
	// Fence, when set, refuses grabs and cancels on shards being rebuilt (fence.go).
	Fence *Fence
	// PromotionKeys, when set, lists the promotion keys whose takes may still be
	// open or owe a CANCEL (store.PromotionKeysEndingAfter): the reconciler visits
	// their pending sets instead of sweeping every shard's keyspace on each pass;
	// its rarer sweep finds the rest.
	PromotionKeys func(ctx context.Context) ([]string, error)
	// States, when set, publishes the sale state changes the scripts' answers carry
	// (promostate.Announcer); the reconciler publishes those left in the outboxes.
	States States
	// EndedPromotionKeys, when set, lists the promotions whose sale ended lately
	// (store.PromotionKeysEndedBetween): the reconciler announces their ENDED.
	EndedPromotionKeys func(ctx context.Context) ([]string, error)
}

// States publishes promotion sale state changes (internal/promostate).
type States interface {
	// Post publishes changes in the background; c is the server whose outbox holds them.
	Post(c redis.Cmdable, changes []promo.StateChange)
	// Announce publishes changes and clears them from c's outbox.
	Announce(ctx context.Context, c redis.Cmdable, changes []promo.StateChange) error
	// Sweep publishes what a crash left in c's outbox.
	Sweep(ctx context.Context, c redis.UniversalClient, now time.Time) (int, error)
}

// Service is what the checkout service and the detail page can do; grabendpoint
// serves it, and Grabber implements it.
type Service interface {
	Grab(ctx context.Context, req Request) (Result, error)
	Cancel(ctx context.Context, requestID, pin, reason string) (Result, error)
	Confirm(ctx context.Context, requestID, pin string) (Result, error)
	Status(ctx context.Context, promoID string, typ int) (Status, error)
	// Resend reports whether req is a resend of a grab that holds a claim (its
	// first send may have been granted): load shedding must let it through to its
	// answer rather than refuse it definitely. An error: the index could not tell.
	Resend(ctx context.Context, req Request) (bool, error)
}

var _ Service = (*Grabber)(nil)

// Grabber implements Service over the 16 shards. It answers the four commands
// (grab.go, cancel.go, holds.go, status.go) from its parts, each with one job;
// the Reconciler (reconcile.go) is built from the same parts.
type Grabber struct {
	*core
	index    *requestIndex // claims and the request index (claim.go)
	route    *router       // items to shards, and bucketed promotions (buckets.go)
	guard    *shardGuard   // fenced, moved and lost shards (guard.go)
	settle   *settler      // undo, abort, commit, return, publish (settle.go)
	refusals *refusalCache
	status   statusCache
	// degradeCap bounds the grabs sent to MySQL while degraded (degradecap.go).
	degradeCap degradeCap
	// stopSweep ends the cache sweeper (cache.go); swept closes when it has.
	stopSweep, swept chan struct{}
}

// New builds the service and starts its shard executors.
func New(cfg Config, d Deps) (*Grabber, error) {
	if len(d.Shards) != ring.Shards {
		return nil, fmt.Errorf("grab service: %d shard clients, want %d", len(d.Shards), ring.Shards)
	}
	if d.Clock == nil {
		d.Clock = time.Now
	}
	if cfg.RefusalCacheSize < 1 || cfg.StatusCacheSize < 1 || cfg.CacheSweepEvery <= 0 {
		return nil, fmt.Errorf("grab service: cache sizes %d and %d and sweep interval %s, want each above 0",
			cfg.RefusalCacheSize, cfg.StatusCacheSize, cfg.CacheSweepEvery)
	}
	c := &core{Deps: d, cfg: cfg, ring: ring.Default}
	for i, sc := range d.Shards {
		c.execs = append(c.execs, newShardExec(i, sc, cfg.exec(), d.Metrics))
	}
	guard := &shardGuard{core: c}
	s := &Grabber{core: c, index: &requestIndex{core: c}, route: newRouter(c), guard: guard,
		settle:   &settler{core: c, guard: guard},
		refusals: expiry.New[cachedRefusal](cfg.RefusalCacheSize, cfg.RefusalTTL),
		status: statusCache{m: expiry.New[cachedStatus](cfg.StatusCacheSize, cfg.StatusTTL).WithStale(StatusStale),
			limit: newStatusLimit(cfg.StatusRate)},
		stopSweep: make(chan struct{}), swept: make(chan struct{})}
	go s.sweepCaches(cfg.CacheSweepEvery)
	return s, nil
}

// Close stops the shard executors and the cache sweeper; call it after the last
// request has finished.
func (s *Grabber) Close() {
	close(s.stopSweep)
	<-s.swept
	for _, e := range s.execs {
		e.close()
	}
}

// group is the part of a request that lives on one shard: an ordinary item is one
// key, an item of a bucketed promotion one key per bucket it touches (its parts).
type group struct {
	shard int
	idx   []int    // indexes into the request's items
	keys  []string // promotion (or bucket) hash keys, in idx order
	parts []string // q.lua part letters by key: "" for an ordinary item
}

// holdsStock reports whether the group's k-th key is where its item's units come
// from (the item itself, or its stock part).
func (g group) holdsStock(k int) bool {
	return promo.HoldsStock(g.parts[k])
}

// Resend implements Service: not a first attempt, and its requestId holds a claim.
func (s *Grabber) Resend(ctx context.Context, req Request) (bool, error) {
	if req.FirstAttempt {
		return false, nil
	}
	return s.index.claimed(ctx, req.RequestID)
}
