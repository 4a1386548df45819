package adminservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
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
	Announce func(ctx context.Context, c redis.Cmdable, changes []lua.StateChange) error
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
	return c
}

// Admin implements Service over the MySQL record and the Redis shards.
type Admin struct {
	store *store.Store
	pool  *shardpool.Pool
	cfg   Config
	log   *slog.Logger

	// Fault points, set only by tests: betweenWrites runs after a change is recorded
	// as pending in MySQL and before it is written to Redis; afterRedis runs after
	// the Redis write and before the change is promoted in MySQL. For a promotion in
	// buckets they bracket the write of bucket 0, the change's commit point
	// (buckets.go): the buckets written before it are written when betweenWrites runs.
	betweenWrites, afterRedis atomic.Pointer[func()]
}

// fault runs a fault point if a test set one.
func fault(p *atomic.Pointer[func()]) {
	if f := p.Load(); f != nil && *f != nil {
		(*f)()
	}
}

var _ Service = (*Admin)(nil)

// New builds the service.
func New(st *store.Store, pool *shardpool.Pool, cfg Config) *Admin {
	cfg = cfg.withDefaults()
	return &Admin{store: st, pool: pool, cfg: cfg, log: cfg.Logger}
}

func (a *Admin) now() time.Time { return a.cfg.Now().UTC().Truncate(time.Millisecond) }

// Create records the promotion and writes its hash on its shard (its K hashes on
// K shards for a promotion in buckets, buckets.go).
func (a *Admin) Create(ctx context.Context, s promo.Spec) (promo.Promotion, error) {
	s.StartAt, s.EndAt = s.StartAt.UTC().Truncate(time.Millisecond), s.EndAt.UTC().Truncate(time.Millisecond)
	if err := validateSpec(s, a.now()); err != nil {
		return promo.Promotion{}, err
	}
	id := store.ID{PromoID: s.PromoID, Type: s.Type}
	parts := split(s)
	var row store.Promotion
	for attempt := 0; ; attempt++ {
		row = store.NewPromotion(s, promo.Active, a.now())
		row.Pending.Actor = actorOf(ctx)
		err := a.store.InsertPool(ctx, row, parts)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrExists) {
			return promo.Promotion{}, mysqlDown(err)
		}
		// The key is taken: by a promotion (even a deleted one, whose flow log must
		// not mix with a new one's), or by a create still pending.
		other, err := a.store.Row(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if attempt < 2 {
				continue // the other create was just undone
			}
			return promo.Promotion{}, fmt.Errorf("%w (other creates of %s keep racing this one)", ErrBusy, id)
		case err != nil:
			return promo.Promotion{}, mysqlDown(err)
		case other.Committed() || other.Pending == nil:
			return promo.Promotion{}, fmt.Errorf("create %s: %w", id, ErrExists)
		}
		if err := a.takeOver(ctx, id, other.Pending, attempt); err != nil {
			return promo.Promotion{}, err
		}
	}
	p, err := a.settle(ctx, id, *row.Pending)
	if err != nil {
		return promo.Promotion{}, err
	}
	return a.answer(ctx, p), nil
}

// split is an envelope pool's parts in the order they are handed out, drawn once
// per create (docs/CONTRACT.md, "Envelope pools"); nil for a promotion that is no pool.
func split(s promo.Spec) []int64 {
	if s.Envelope == nil {
		return nil
	}
	return promo.SplitEnvelope(s.Envelope.Amount, s.Envelope.MinAmount, int(s.Total), rand.New(defaultSource{}))
}

// defaultSource is math/rand/v2's default source, safe for concurrent use, as a
// rand.Source.
type defaultSource struct{}

func (defaultSource) Uint64() uint64 { return rand.Uint64() }

// Get reads the committed record and the live counters of its hash.
func (a *Admin) Get(ctx context.Context, id store.ID) (promo.Promotion, error) {
	if err := validateID(id); err != nil {
		return promo.Promotion{}, err
	}
	p, err := a.store.Get(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return promo.Promotion{}, fmt.Errorf("get %s: %w", id, ErrNotFound)
	case err != nil:
		return promo.Promotion{}, mysqlDown(err)
	case p.State == promo.Deleted:
		return promo.Promotion{}, fmt.Errorf("get %s: %w", id, ErrNotFound)
	}
	return a.live(ctx, p)
}

// History is the audit trail of a promotion, a deleted one included (its delete is
// the last entry); NOT_FOUND only for a promotion the record never had.
func (a *Admin) History(ctx context.Context, id store.ID) (History, error) {
	if err := validateID(id); err != nil {
		return History{}, err
	}
	entries, err := a.store.History(ctx, id, store.MaxHistory)
	if err != nil {
		return History{}, mysqlDown(err)
	}
	if len(entries) == 0 {
		if _, err := a.store.Row(ctx, id); errors.Is(err, store.ErrNotFound) {
			return History{}, fmt.Errorf("history of %s: %w", id, ErrNotFound)
		} else if err != nil {
			return History{}, mysqlDown(err)
		}
	}
	return History{Entries: entries}, nil
}

// List pages through the record, newest first. Its counters are the record's
// (kept by the flow sink); Get reads one promotion's live counters from its shard.
func (a *Admin) List(ctx context.Context, q ListQuery) (ListPage, error) {
	if err := validateList(q); err != nil {
		return ListPage{}, err
	}
	now := a.now()
	page, err := a.store.List(ctx, store.ListQuery{State: promo.State(q.State), Now: now, Limit: q.Limit, Cursor: q.Cursor})
	if err != nil {
		if errors.Is(err, store.ErrBadCursor) {
			return ListPage{}, invalid("cursor", "is not a cursor this service gave out")
		}
		return ListPage{}, mysqlDown(err)
	}
	out := ListPage{Items: make([]promo.Promotion, len(page.Items)), NextCursor: page.NextCursor}
	for i, p := range page.Items {
		out.Items[i] = recorded(p, now)
	}
	return out, nil
}

// Patch changes a live promotion; the shard refuses a total below what is granted.
func (a *Admin) Patch(ctx context.Context, id store.ID, patch Patch) (promo.Promotion, error) {
	if err := validateID(id); err != nil {
		return promo.Promotion{}, err
	}
	if err := validatePatch(patch); err != nil {
		return promo.Promotion{}, err
	}
	ch, err := a.propose(ctx, id, func(p *store.Promotion) (*store.Change, error) {
		if k := promo.BucketsOf(p.Spec.Buckets); patch.Buckets != nil && *patch.Buckets != k {
			return nil, invalid("buckets", "is fixed at create: the promotion has %d; create another promotion for another count", k)
		}
		if patch.empty() {
			return nil, errPatchEmpty
		}
		if err := envelopeFixed(p.Spec, patch); err != nil {
			return nil, err
		}
		if p.State == promo.Stopped {
			return nil, fmt.Errorf("patch %s: %w", id, ErrStopped)
		}
		next := p.Spec
		if patch.Total != nil {
			next.Total = *patch.Total
		}
		if patch.PerPinLimit != nil {
			next.PerPinLimit = *patch.PerPinLimit
		}
		if patch.PerIPLimit != nil {
			next.PerIPLimit = *patch.PerIPLimit
		}
		if patch.RateLimit != nil {
			rl := *patch.RateLimit
			next.RateLimit = &rl
		}
		if patch.EndAt != nil {
			next.EndAt = patch.EndAt.UTC().Truncate(time.Millisecond)
			if err := validateEnd(next.StartAt, next.EndAt, a.now()); err != nil {
				return nil, err
			}
		}
		return &store.Change{Op: store.OpPatch, Spec: next, State: p.State}, nil
	})
	if err != nil {
		return promo.Promotion{}, err
	}
	p, err := a.settle(ctx, id, ch)
	if err != nil {
		return promo.Promotion{}, err
	}
	return a.answer(ctx, p), nil
}

// envelopeFixed refuses a patch changing what an envelope pool fixed at create:
// its size (total). The pool's own total changes nothing and is accepted, as the
// promotion's own bucket count is.
func envelopeFixed(s promo.Spec, patch Patch) error {
	if s.Envelope != nil && patch.Total != nil && *patch.Total != s.Total {
		return &EnvelopeFixedError{Field: "total", Have: s.Total, Want: *patch.Total}
	}
	return nil
}

// errNoChange ends a propose that finds nothing to do (a stop of a stopped promotion).
var errNoChange = errors.New("nothing to change")

// Stop stops a promotion now; stopping a stopped promotion changes nothing.
func (a *Admin) Stop(ctx context.Context, id store.ID, reason string) (promo.Promotion, error) {
	if err := validateID(id); err != nil {
		return promo.Promotion{}, err
	}
	if len([]rune(reason)) > MaxReasonLen {
		return promo.Promotion{}, invalid("reason", "must be at most %d characters", MaxReasonLen)
	}
	ch, err := a.propose(ctx, id, func(p *store.Promotion) (*store.Change, error) {
		if p.State == promo.Stopped {
			return nil, errNoChange
		}
		return &store.Change{Op: store.OpStop, Spec: p.Spec, State: promo.Stopped}, nil
	})
	if errors.Is(err, errNoChange) {
		p, err := a.store.Get(ctx, id)
		if err != nil {
			return promo.Promotion{}, mysqlDown(err)
		}
		return a.answer(ctx, p), nil
	}
	if err != nil {
		return promo.Promotion{}, err
	}
	p, err := a.settle(ctx, id, ch)
	if err != nil {
		return promo.Promotion{}, err
	}
	a.log.InfoContext(ctx, "promotion stopped", "promotion", id.String(), "reason", reason, "version", p.Version)
	return a.answer(ctx, p), nil
}

// Delete removes the hash from Redis (its ledger expires a day later, delete.lua);
// the row stays, DELETED.
func (a *Admin) Delete(ctx context.Context, id store.ID) error {
	if err := validateID(id); err != nil {
		return err
	}
	ch, err := a.propose(ctx, id, func(p *store.Promotion) (*store.Change, error) {
		return &store.Change{Op: store.OpDelete, Spec: p.Spec, State: promo.Deleted}, nil
	})
	if err != nil {
		return err
	}
	_, err = a.settle(ctx, id, ch)
	return err
}

func mysqlDown(err error) error {
	return &UnavailableError{Dependency: "mysql", Msg: "the record could not be read or written; nothing was changed", Err: err}
}
