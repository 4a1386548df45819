package shardpool_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/testenv"
)

// A moved shard's client reaches the new server from its next call, connections
// to the old one included (none of them carries another command), and moving it
// back returns it; a server's shards move together or not at all.
func TestMovePointsShardsAtAnotherServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b, replica := testenv.StartRedis(t, testenv.Volatile), testenv.StartRedis(t, testenv.Volatile), testenv.StartRedis(t, testenv.Volatile)
	addrs := repeat(a.Addr, 16)
	addrs[5] = b.Addr // shard 5 alone on b
	p, err := shardpool.New(addrs, redis.Options{MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	whoAmI := func(shard int) string {
		t.Helper()
		v, err := p.Client(shard).Get(ctx, "whoami").Result()
		if err != nil {
			return "error: " + err.Error()
		}
		return v
	}
	for _, s := range []*testenv.RedisServer{a, b, replica} {
		c := redis.NewClient(&redis.Options{Addr: s.Addr})
		if err := c.Set(ctx, "whoami", s.Addr, 0).Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	if whoAmI(5) != b.Addr || whoAmI(4) != a.Addr {
		t.Fatalf("before the move: shard 5 on %s, shard 4 on %s", whoAmI(5), whoAmI(4))
	}
	moved, err := p.Move(map[int]string{5: replica.Addr})
	if err != nil || len(moved) != 1 || moved[0] != 5 || p.Addr(5) != replica.Addr {
		t.Fatalf("move: %v %v, addr %s", moved, err, p.Addr(5))
	}
	// The pooled connection to b refuses the write, and go-redis sends the
	// command again on a new connection, to the replica: no call fails for the move.
	for range 5 {
		if got := whoAmI(5); got != replica.Addr {
			t.Fatalf("after the move shard 5 reached %q, want the replica %s", got, replica.Addr)
		}
	}
	if whoAmI(4) != a.Addr {
		t.Fatal("a shard not moved moved")
	}
	if moved, err := p.Move(map[int]string{5: replica.Addr}); err != nil || len(moved) != 0 {
		t.Fatalf("the same document again moved %v (%v)", moved, err)
	}
	// Shards 0..4 and 6..15 share a: naming one of them alone is refused whole.
	if _, err := p.Move(map[int]string{0: replica.Addr, 5: b.Addr}); err == nil || !strings.Contains(err.Error(), "move together") {
		t.Fatalf("half a server moved: %v", err)
	}
	if p.Addr(5) != replica.Addr {
		t.Fatal("a refused move changed something")
	}
	if moved, err := p.Move(nil); err != nil || len(moved) != 1 {
		t.Fatalf("back to the flags: %v %v", moved, err)
	}
	if got := whoAmI(5); got != b.Addr {
		t.Fatalf("after moving back shard 5 reached %q, want %s", got, b.Addr)
	}
}
