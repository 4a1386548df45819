package shardpool_test

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/testenv"
)

// A master SIGKILLed is promoted away by a real sentinel, and the pool follows:
// shard 0's client dials the promoted replica, its generation moves, and the
// shards the sentinels do not name stay where they are configured. On-call's
// override (Move) still wins over the sentinels' word, and lifted, gives way to it.
func TestPoolFollowsTheSentinels(t *testing.T) {
	master, replica, other := testenv.StartRedis(t, testenv.Volatile), testenv.StartRedis(t, testenv.Volatile), testenv.StartRedis(t, testenv.Volatile)
	replica.ReplicaOf(master)
	sentinel := testenv.StartSentinel(t, map[string]string{shardpool.MasterName("shard-", 0): master.Addr})

	addrs := other.Addrs()
	addrs[0] = master.Addr
	pool, err := shardpool.New(addrs, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := shardpool.NewSentinels([]string{"127.0.0.1:1", sentinel.Addr}, "shard-", redis.Options{}) // the first does not answer
	defer s.Close()
	var mu sync.Mutex
	var movedShards []int
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Follow(ctx, pool, 50*time.Millisecond, slog.Default(), func(shards []int) {
		mu.Lock()
		movedShards = append(movedShards, shards...)
		mu.Unlock()
	})

	gen := pool.Generation(0)
	master.Kill()
	deadline := time.Now().Add(20 * time.Second)
	for pool.Addr(0) != replica.Addr {
		if time.Now().After(deadline) {
			t.Fatalf("shard 0 still dials %s 20 s after its master died; want the promoted replica %s", pool.Addr(0), replica.Addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if pool.Generation(0) == gen {
		t.Fatal("shard 0 moved but its generation did not: the fence would not judge the new server")
	}
	if err := pool.Client(0).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("write to the promoted replica through the pool: %v", err)
	}
	for shard := 1; shard < 16; shard++ {
		if pool.Addr(shard) != other.Addr {
			t.Fatalf("shard %d moved to %s; the sentinels name only shard 0", shard, pool.Addr(shard))
		}
	}
	mu.Lock()
	if !slices.Contains(movedShards, 0) {
		t.Errorf("onMoved heard %v, want shard 0", movedShards)
	}
	mu.Unlock()

	if _, err := pool.Move(map[int]string{0: other.Addr}); err != nil || pool.Addr(0) != other.Addr {
		t.Fatalf("on-call's override: err %v, shard 0 dials %s, want %s", err, pool.Addr(0), other.Addr)
	}
	time.Sleep(200 * time.Millisecond) // several rounds of the sentinels' word
	if pool.Addr(0) != other.Addr {
		t.Fatalf("the sentinels' word overrode on-call's: shard 0 dials %s", pool.Addr(0))
	}
	if _, err := pool.Move(nil); err != nil || pool.Addr(0) != replica.Addr {
		t.Fatalf("override lifted: err %v, shard 0 dials %s, want the elected %s", err, pool.Addr(0), replica.Addr)
	}
}
