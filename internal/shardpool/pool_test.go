package shardpool_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/testenv"
)

func repeat(addr string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = addr
	}
	return out
}

func TestNewWantsSixteenAddresses(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 15, 17} {
		if _, err := shardpool.New(repeat("127.0.0.1:7001", n), redis.Options{}); err == nil {
			t.Errorf("New with %d addresses: want an error", n)
		}
	}
	addrs := repeat("127.0.0.1:7001", 16)
	addrs[3] = " "
	_, err := shardpool.New(addrs, redis.Options{})
	if err == nil || !strings.Contains(err.Error(), "shard 3") {
		t.Errorf("New with an empty address: want an error naming shard 3, have %v", err)
	}
}

func TestSharedAddressesShareOneClient(t *testing.T) {
	t.Parallel()
	addrs := repeat("127.0.0.1:7001", 16)
	addrs[5] = "127.0.0.1:7002"
	p, err := shardpool.New(addrs, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Client(0) != p.Client(15) {
		t.Error("shards 0 and 15 share an address but not a client")
	}
	if p.Client(0) == p.Client(5) {
		t.Error("shards 0 and 5 have different addresses but share a client")
	}
	if have := len(p.Servers()); have != 2 {
		t.Errorf("Servers: want 2 distinct clients, have %d", have)
	}
	if have := p.Client(5).Options().Addr; have != "127.0.0.1:7002" {
		t.Errorf("shard 5 address: want 127.0.0.1:7002, have %s", have)
	}
}

func TestForFollowsTheRing(t *testing.T) {
	t.Parallel()
	addrs := make([]string, 16)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", 7001+i)
	}
	p, err := shardpool.New(addrs, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for key, want := range map[string]int{"C_A_1": 14, "C_100001_1": 10, "C_B_2": 2, "C_X9_99": 7} {
		shard, c := p.For(key)
		if shard != want || shard != ring.Default.Shard(key) {
			t.Errorf("For(%s): want shard %d, have %d", key, want, shard)
		}
		if c != p.Client(want) || c.Options().Addr != addrs[want] {
			t.Errorf("For(%s): client of %s, want %s", key, c.Options().Addr, addrs[want])
		}
	}
}

func TestPingNamesFailingShards(t *testing.T) {
	t.Parallel()
	live := testenv.Stack(t).Redis
	// A port that nothing listens on: bind one, then release it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()

	addrs := append([]string(nil), live...)
	addrs[4], addrs[11] = dead, dead
	// The dead port refuses at once; the bound is for the live shards' dials, which
	// a loaded machine (the race detector, every package at once) may run late.
	p, err := shardpool.New(addrs, redis.Options{DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	err = p.Ping(context.Background())
	var se *shardpool.ShardError
	if !errors.As(err, &se) {
		t.Fatalf("Ping: want a *ShardError, have %v", err)
	}
	if len(se.Shards) != 2 || se.Shards[0] != 4 || se.Shards[1] != 11 {
		t.Errorf("failing shards: want [4 11], have %v", se.Shards)
	}
	if !strings.Contains(err.Error(), "redis shard 4") || !strings.Contains(err.Error(), "redis shard 11") {
		t.Errorf("error should name shards 4 and 11: %v", err)
	}

	ok, err := shardpool.New(live, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ok.Close()
	if err := ok.Ping(context.Background()); err != nil {
		t.Errorf("Ping of the live stack: %v", err)
	}
}
