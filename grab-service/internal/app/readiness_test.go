package app

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/testenv"
)

// The MySQL and Kafka checks are stand-ins (functions that fail on demand); the
// shards are the local stack's redis-servers plus an address where nothing listens.
func TestReadinessFailsOnlyWhenNoShardAnswers(t *testing.T) {
	t.Parallel()
	live := testenv.Stack(t).Redis
	const dead = "127.0.0.1:1" // nothing listens on port 1
	oneLost := append([]string{dead}, live[1:]...)
	allLost := make([]string, 16)
	for i := range allLost {
		allLost[i] = dead
	}
	down := errors.New("down")
	up := func(context.Context) error { return nil }
	fail := func(context.Context) error { return down }
	degraded, _ := configcenter.Parse([]byte(`{"kafkaDegrade": true}`))

	cases := []struct {
		name           string
		redis          []string
		kafka, mysql   func(context.Context) error
		degrade        bool
		wantReady      bool
		wantAdvisories []string
	}{
		{"all well", live, up, up, false, true, nil},
		{"one shard lost", oneLost, up, up, false, true, []string{"redis shards"}},
		{"every shard lost", allLost, up, up, false, false, []string{"redis shards"}},
		// Grabs answer 503 bodies; status, cancel and confirm go on serving.
		{"kafka down", live, fail, up, false, true, []string{"kafka", "commit"}},
		{"kafka down while degraded", live, fail, up, true, true, []string{"kafka"}},
		{"kafka and mysql down while degraded", live, fail, fail, true, true, []string{"kafka", "mysql", "commit"}},
	}
	for _, c := range cases {
		pool, err := shardpool.New(c.redis, redis.Options{MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		switches := configcenter.NewHolder()
		if c.degrade {
			switches.Store(degraded)
		}
		required, advisory := readiness(pool, c.mysql, c.kafka, switches)
		ready := true
		for _, check := range required {
			if check(context.Background()) != nil {
				ready = false
			}
		}
		if ready != c.wantReady {
			t.Errorf("%s: ready %v, want %v", c.name, ready, c.wantReady)
		}
		for _, name := range c.wantAdvisories {
			if advisory[name](context.Background()) == nil {
				t.Errorf("%s: advisory %q should report the failure", c.name, name)
			}
		}
		pool.Close()
	}
}
