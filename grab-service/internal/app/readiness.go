package app

import (
	"context"
	"errors"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/shardpool"
)

// readiness splits grab-service's checks. The instance is unready only when no
// shard answers: then it can answer nothing from Redis. Whatever else fails is
// reported under degraded and keeps the instance in its load balancer, since every
// instance would fail alike: one lost shard (the other promotions sell on), and the
// commit path, Kafka (or MySQL while kafkaDegrade is on). Without a commit path a
// grab answers 503 UNAVAILABLE with a body, nothing taken, while the routes that
// need no Kafka go on serving: status, cancel (its CANCEL is owed and paid later),
// confirm. An unready fleet would answer them all with connection errors instead.
func readiness(pool *shardpool.Pool, mysql, kafka httpx.Check, switches *configcenter.Holder) (required, advisory map[string]httpx.Check) {
	required = map[string]httpx.Check{
		"redis": func(ctx context.Context) error {
			var se *shardpool.ShardError
			if err := pool.Ping(ctx); err != nil && (!errors.As(err, &se) || len(se.Shards) == ring.Shards) {
				return err
			}
			return nil
		},
	}
	advisory = map[string]httpx.Check{"redis shards": pool.Ping, "mysql": mysql, "kafka": kafka,
		"commit": func(ctx context.Context) error {
			if switches.Load().KafkaDegrade {
				return mysql(ctx)
			}
			return kafka(ctx)
		},
	}
	return required, advisory
}
