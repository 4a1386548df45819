package adminservice

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// announcer publishes the sale state changes the admin scripts made; what it
// cannot publish waits in the shard's outbox for the reconciler.
type announcer struct {
	publish func(ctx context.Context, c redis.Cmdable, changes []promo.StateChange) error // Config.Announce
	log     *slog.Logger
}

func (a *announcer) announce(ctx context.Context, c redis.Cmdable, changes []promo.StateChange) {
	if a.publish == nil || len(changes) == 0 {
		return
	}
	if err := a.publish(ctx, c, changes); err != nil {
		a.log.WarnContext(ctx, "promotion state change left for the reconciler", "err", err)
	}
}
