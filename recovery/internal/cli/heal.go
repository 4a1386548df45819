package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/recovery/internal/flowlag"
	"github.com/flashsale/platform/recovery/internal/heal"
	"github.com/flashsale/platform/recovery/internal/rebuild"
)

// healEvery is how often the healer reads every shard's markers.
const healEvery = 500 * time.Millisecond

// healerLoops builds the sink process's healer over a shard pool of its own, which
// follows the sentinels and on-call's switches as the services' pools do, and
// returns the loops that keep it so and heal, and what closes the pool.
func healerLoops(ctx context.Context, f svc.Flags, src configcenter.Source, db *store.Store, lag *flowlag.Meter,
	reg prometheus.Registerer, log *slog.Logger) ([]func(context.Context) error, func(), error) {
	auth, err := svc.RedisAuthFromEnv()
	if err != nil {
		return nil, nil, err
	}
	opts := redis.Options{DialTimeout: 2 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second}
	auth.Apply(&opts)
	pool, err := shardpool.New(f.Redis, opts)
	if err != nil {
		return nil, nil, err
	}
	shards := make([]redis.UniversalClient, len(f.Redis))
	for i := range shards {
		shards[i] = pool.Client(i)
	}
	switches := configcenter.NewHolder()
	switches.AllowShardAddrs(shardpool.Allowlist(f.RedisAllow, f.Redis))
	switches.FollowShards(pool, log, nil)
	o := rebuild.Defaults()
	h := heal.New(shards, db.DB().DB, func(ctx context.Context, targets []int) error {
		o.Shards = targets
		_, err := rebuild.Run(ctx, rebuild.Deps{Shards: shards, Record: db.Rebuild, Flows: db.Flows, Lag: lag, Log: log}, o)
		return err
	}, reg, log)
	loops := []func(context.Context) error{
		shardpool.FollowSentinels(ctx, pool, f.RedisSentinels, f.RedisSentinelPrefix, opts, log, nil),
		func(ctx context.Context) error {
			return configcenter.Follow(ctx, src, switches, configcenter.NewMetrics(reg), log)
		},
		func(ctx context.Context) error { return h.Run(ctx, healEvery) },
	}
	return loops, func() { pool.Close() }, nil
}
