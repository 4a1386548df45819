package adminservice

import (
	"context"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
)

// view is a committed row as the API shows it, with the given counters.
func view(p store.Promotion, remaining, granted int64, now time.Time) promo.Promotion {
	key := p.ID().Key()
	return promo.Promotion{
		Spec:      p.Spec,
		Key:       key,
		Shard:     ring.Default.Shard(key),
		State:     promo.DeriveState(p.State, p.Spec.StartAt, p.Spec.EndAt, remaining, now),
		Remaining: remaining,
		Granted:   granted,
		CreatedAt: p.CreatedAt,
		UpdatedAt: p.UpdatedAt,
	}
}

// recorded is the view with the record's counters (kept by the flow sink).
func recorded(p store.Promotion, now time.Time) promo.Promotion {
	return view(p, p.Remaining, p.Spec.Total-p.Remaining, now)
}

// live is the view with the counters read from the promotion's hash.
func (a *Admin) live(ctx context.Context, p store.Promotion) (promo.Promotion, error) {
	key := p.ID().Key()
	shard, c := a.pool.For(key)
	ctx, cancel := context.WithTimeout(ctx, a.cfg.RedisTimeout)
	defer cancel()
	h, exists, err := lua.ReadHash(ctx, c, key)
	if err != nil {
		return promo.Promotion{}, &UnavailableError{Dependency: shardName(shard), Msg: "could not read the live counters", Err: err}
	}
	if !exists {
		return promo.Promotion{}, &UnavailableError{Dependency: shardName(shard),
			Msg: "the shard has no hash for this promotion although the record has it; rebuild the shard with bin/recovery"}
	}
	return view(p, h.Remaining, h.Granted(), a.now()), nil
}

// answer is the view a successful change returns: live when the shard answers,
// else the record's (the change is done either way).
func (a *Admin) answer(ctx context.Context, p store.Promotion) promo.Promotion {
	v, err := a.live(ctx, p)
	if err != nil {
		a.log.WarnContext(ctx, "answering with the record's counters", "promotion", p.ID().String(), "err", err)
		return recorded(p, a.now())
	}
	return v
}
