package adminservice

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/fault"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
)

// Config tunes the service; zero fields take the defaults.
type Config struct {
	// RedisTimeout bounds each Redis call (default 2s).
	RedisTimeout time.Duration
	// RepairGrace is how long a pending change belongs to the request that made it
	// (default 15s). Other requests answer BUSY meanwhile; after it the repairer, or
	// the next request, resolves the change. It must well exceed RedisTimeout, so a
	// request is never still writing to Redis when its change is resolved.
	RepairGrace time.Duration
	// RepairEvery is the repairer's period (default 3s).
	RepairEvery time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Announce, when set, publishes the sale state changes an admin script made
	// (promostate.Announcer.Announce); unset, or failing, they wait in the shard's
	// outbox for grab-service's reconciler.
	Announce func(ctx context.Context, c redis.Cmdable, changes []promo.StateChange) error
	// RequireApproval makes creates and patches proposals an approver applies
	// (approval.go); off, they apply at once.
	RequireApproval bool
	// ProposalsPerPromotion and ProposalsTotal bound the pending proposals of one
	// promotion (default 10) and of all (default 1000).
	ProposalsPerPromotion, ProposalsTotal int
}

func (c Config) withDefaults() Config {
	if c.RedisTimeout <= 0 {
		c.RedisTimeout = 2 * time.Second
	}
	if c.RepairGrace <= 0 {
		c.RepairGrace = 15 * time.Second
	}
	if c.RepairEvery <= 0 {
		c.RepairEvery = 3 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ProposalsPerPromotion <= 0 {
		c.ProposalsPerPromotion = 10
	}
	if c.ProposalsTotal <= 0 {
		c.ProposalsTotal = 1000
	}
	return c
}

// clock is the service's time, in UTC to the millisecond as the record keeps it.
type clock func() time.Time

func (c clock) now() time.Time { return c().UTC().Truncate(time.Millisecond) }

// faults holds the fault hook tests set (fault.Hook, as grab-service's): it runs
// at "between-writes", after a change is recorded as pending in MySQL and before
// Redis is written, and at "after-redis", before the change is promoted. For a
// promotion in buckets they bracket the write of bucket 0, the commit point.
type faults struct {
	hook atomic.Pointer[fault.Hook]
}

// at runs the hook at point, if a test set one. The hook's work is the fault (a
// server killed, a store closed); the change then goes on and meets it.
func (f *faults) at(point string) {
	if h := f.hook.Load(); h != nil {
		_ = h.At(point)
	}
}

// Admin implements Service over the MySQL record and the Redis shards: one handler
// a command or query, each holding only what it uses, and the journal's repairer.
type Admin struct {
	create  createHandler
	get     getHandler
	history historyHandler
	tl      timelineHandler
	list    listHandler
	patch   patchHandler
	stop    stopHandler
	del     deleteHandler
	repair  repairer
	faults  *faults
}

var _ Service = (*Admin)(nil)

// repairer resolves the changes their requests left pending.
type repairer interface {
	repair(ctx context.Context) error
	run(ctx context.Context) error
}

// New builds the service from the record and the shard pool.
func New(st Record, pool Shards, cfg Config) *Admin {
	cfg = cfg.withDefaults()
	now, log := clock(cfg.Now), cfg.Logger
	out := &announcer{publish: cfg.Announce, log: log}
	bk := &buckets{shards: pool, timeout: cfg.RedisTimeout, now: now, announce: out}
	fs := &faults{}
	j := &journal{rows: st, shards: pool, buckets: bk, announce: out, timeout: cfg.RedisTimeout,
		grace: cfg.RepairGrace, every: cfg.RepairEvery, now: now, log: log, faults: fs}
	j.inBuckets = &bucketJournal{rows: st, shards: pool, buckets: bk, commit: j, announce: out,
		timeout: cfg.RedisTimeout, now: now, log: log, faults: fs}
	v := &viewer{rows: st, shards: pool, buckets: bk, timeout: cfg.RedisTimeout, now: now, log: log}
	return &Admin{
		create:  createHandler{rows: st, journal: j, view: v, now: now},
		get:     getHandler{rows: st, view: v},
		history: historyHandler{rows: st},
		tl:      timelineHandler{rows: st},
		list:    listHandler{rows: st, now: now},
		patch:   patchHandler{journal: j, view: v, now: now},
		stop:    stopHandler{rows: st, journal: j, view: v, log: log},
		del:     deleteHandler{journal: j},
		repair:  j,
		faults:  fs,
	}
}

// Create records the promotion and writes its hash on its shard (its K hashes on
// K shards for a promotion in buckets, buckets.go).
func (a *Admin) Create(ctx context.Context, s promo.Spec) (promo.Promotion, error) {
	return a.create.handle(ctx, s)
}

// Get reads the committed record and the live counters of its hash.
func (a *Admin) Get(ctx context.Context, id store.ID) (promo.Promotion, error) {
	return a.get.handle(ctx, id)
}

// History is the audit trail of a promotion, a deleted one included (its delete is
// the last entry); NOT_FOUND only for a promotion the record never had.
func (a *Admin) History(ctx context.Context, id store.ID) (History, error) {
	return a.history.handle(ctx, id)
}

// Timeline is a promotion's sale as the flow log recorded it, a deleted
// promotion's included; NOT_FOUND for a promotion the record never committed.
func (a *Admin) Timeline(ctx context.Context, id store.ID) (Timeline, error) {
	return a.tl.handle(ctx, id)
}

// List pages through the record, newest first. Its counters are the record's
// (kept by the flow sink); Get reads one promotion's live counters from its shard.
func (a *Admin) List(ctx context.Context, q ListQuery) (ListPage, error) {
	return a.list.handle(ctx, q)
}

// Patch changes a live promotion; the shard refuses a total below what is granted.
func (a *Admin) Patch(ctx context.Context, id store.ID, p Patch) (promo.Promotion, error) {
	return a.patch.handle(ctx, id, p)
}

// Stop stops a promotion now; stopping a stopped promotion changes nothing.
func (a *Admin) Stop(ctx context.Context, id store.ID, reason string) (promo.Promotion, error) {
	return a.stop.handle(ctx, id, reason)
}

// Delete removes the hash from Redis (its ledger expires a day later, delete.lua);
// the row stays, DELETED.
func (a *Admin) Delete(ctx context.Context, id store.ID) error {
	return a.del.handle(ctx, id)
}

// Repair resolves every change pending for longer than RepairGrace whose shard
// answers; the others wait for the next run. The error joins what failed.
func (a *Admin) Repair(ctx context.Context) error { return a.repair.repair(ctx) }

// RunRepairer runs Repair at once and then every RepairEvery until ctx is done.
func (a *Admin) RunRepairer(ctx context.Context) error { return a.repair.run(ctx) }

func mysqlDown(err error) error {
	return &UnavailableError{Dependency: "mysql", Msg: "the record could not be read or written; nothing was changed", Err: err}
}
