package app

import (
	"context"
	"errors"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/shardpool"
)

// readiness splits grab-service's checks. The instance is unready only when it can
// grant nothing: no shard answers, or neither Kafka nor (while degraded) MySQL can
// take a commit. One lost shard or a down Kafka under kafkaDegrade is reported but
// keeps the instance in its load balancer: every instance would fail alike, and the
// fleet would stop selling the promotions that are still fine.
func readiness(pool *shardpool.Pool, mysql, kafka httpx.Check, switches *configcenter.Holder) (required, advisory map[string]httpx.Check) {
	required = map[string]httpx.Check{
		"redis": func(ctx context.Context) error {
			var se *shardpool.ShardError
			if err := pool.Ping(ctx); err != nil && (!errors.As(err, &se) || len(se.Shards) == ring.Shards) {
				return err
			}
			return nil
		},
		"commit": func(ctx context.Context) error {
			if switches.Load().KafkaDegrade {
				return mysql(ctx)
			}
			return kafka(ctx)
		},
	}
	advisory = map[string]httpx.Check{"redis shards": pool.Ping, "mysql": mysql, "kafka": kafka}
	return required, advisory
}
