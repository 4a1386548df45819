package grab

// Coalescing benchmark against a real redis-server (the local stack's shard 0):
// the same q.lua grab sent by many goroutines, each on its own round trip
// (direct, go-redis pooling only) against calls coalesced into shared pipelines.
// Besides ns/op, coalesced reports the redis-server's own CPU per grab
// (redis-us/op, from INFO cpu): the figure that bounds a hot promotion, whose
// shard is one Redis core. Compare in one run: go test -bench ShardGrab -run ^$ ./internal/grab

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
)

func benchPromotion(b *testing.B, c redis.UniversalClient) string {
	key := promo.Key("bench-"+testenv.Suffix(), 1)
	now := time.Now()
	if _, err := lua.Create(context.Background(), c, ring.Default.Shard(key), key, lua.AdminSpec{Ver: 1, Total: 1_000_000_000, MaxPerGrab: 1,
		StartMs: now.Add(-time.Minute).UnixMilli(), EndMs: now.Add(time.Hour).UnixMilli(), State: "ACTIVE"}); err != nil {
		b.Fatal(err)
	}
	keys := promo.Keys(key)
	b.Cleanup(func() { c.Del(context.Background(), keys[:]...) })
	return key
}

func BenchmarkShardGrab(b *testing.B) {
	client := redis.NewClient(&redis.Options{Addr: testenv.Stack(b).Redis[0], PoolSize: 256})
	defer client.Close()
	if err := lua.Load(context.Background(), client); err != nil {
		b.Fatal(err)
	}
	key := benchPromotion(b, client)
	var seq atomic.Int64
	call := func() lua.GrabCall {
		n := seq.Add(1)
		now := time.Now().UnixMilli()
		return lua.GrabCall{NowMs: now, DeadlineMs: now + 3000, RequestID: fmt.Sprintf("b%d", n), BodyHash: "h",
			Pin: fmt.Sprintf("p%d", n), IP: "10.0.0.1", RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}}}
	}
	for _, par := range []int{8, 32} { // goroutines per core: 16 and 64 in flight on 2 cores
		b.Run(fmt.Sprintf("direct/inflight=%d", par*2), func(b *testing.B) {
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r, err := lua.Grab(context.Background(), client, call()); err != nil || r.Code != lua.CodeOK {
						b.Fatalf("%v %v", r, err)
					}
				}
			})
		})
		b.Run(fmt.Sprintf("coalesced/inflight=%d", par*2), func(b *testing.B) {
			e := newShardExec(0, client, execConfig{workers: 4, maxBatch: 64, queue: 4096, timeout: time.Second}, NewMetrics(prometheus.NewRegistry()))
			defer e.close()
			cpu := redisCPU(b, client)
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c := call()
					r, err := lua.ParseGrab(e.do(context.Background(), func(p redis.Pipeliner) *redis.Cmd { return lua.QueueGrab(context.Background(), p, c) }))
					if err != nil || r.Code != lua.CodeOK {
						b.Fatalf("%v %v", r, err)
					}
				}
			})
			b.ReportMetric((redisCPU(b, client)-cpu)*1e6/float64(b.N), "redis-us/op")
		})
	}
}

// BenchmarkShardCommit is the commit of coalesced grabs: each its own commit.lua
// call in the shared pipeline (one-each, as before batching) against one call for
// all the pipeline's commits (batched, shardExec.commit), with the redis-server's
// CPU per commit. The takes are made before the timer.
// go test -bench ShardCommit -run ^$ ./internal/grab
func BenchmarkShardCommit(b *testing.B) {
	client := testenv.StartRedis(b, testenv.Volatile).Client()
	if err := lua.Load(context.Background(), client); err != nil {
		b.Fatal(err)
	}
	key := benchPromotion(b, client)
	var seq int
	for _, batched := range []bool{false, true} {
		name := "one-each"
		if batched {
			name = "batched"
		}
		b.Run(name+"/inflight=64", func(b *testing.B) {
			rids := takes(b, client, key, &seq, b.N)
			var next atomic.Int64
			onExec(b, client, func(ctx context.Context, e *shardExec) {
				call := lua.CommitCall{RequestID: rids[next.Add(1)-1], Keys: []string{key}}
				var code lua.CommitCode
				var err error
				if batched {
					code, err = e.commit(ctx, call)
				} else {
					code, err = lua.ParseCommit(e.do(ctx, func(p redis.Pipeliner) *redis.Cmd {
						return lua.QueueCommit(ctx, p, call.RequestID, call.Keys)
					}))
				}
				if err != nil || code != lua.CommitCommitted {
					b.Fatalf("commit %s: %v %v", call.RequestID, code, err)
				}
			})
		})
	}
}

// onExec runs op on one shard's executor (4 workers, 64 calls in flight) and
// reports the redis-server's CPU per op.
func onExec(b *testing.B, client *redis.Client, op func(ctx context.Context, e *shardExec)) {
	e := newShardExec(0, client, execConfig{workers: 4, maxBatch: 64, queue: 4096, timeout: time.Second}, NewMetrics(prometheus.NewRegistry()))
	defer e.close()
	cpu := redisCPU(b, client)
	b.ResetTimer()
	b.SetParallelism(32)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			op(ctx, e)
		}
	})
	b.StopTimer()
	b.ReportMetric((redisCPU(b, client)-cpu)*1e6/float64(b.N), "redis-us/op")
}

// takes makes n takes on key in pipelines of 256, and returns their requestIds.
func takes(b *testing.B, c *redis.Client, key string, seq *int, n int) []string {
	ctx := context.Background()
	rids := make([]string, 0, n)
	for len(rids) < n {
		p := c.Pipeline()
		var cmds []*redis.Cmd
		for i := 0; i < 256 && len(rids) < n; i++ {
			*seq++
			rid := fmt.Sprintf("c%d", *seq)
			now := time.Now().UnixMilli()
			cmds = append(cmds, lua.QueueGrab(ctx, p, lua.GrabCall{NowMs: now, DeadlineMs: now + 3_600_000, RequestID: rid, BodyHash: "h",
				Pin: rid, IP: "10.0.0.1", RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}}}))
			rids = append(rids, rid)
		}
		if _, err := p.Exec(ctx); err != nil {
			b.Fatal(err)
		}
		for _, cmd := range cmds {
			if r, err := lua.ParseGrab(cmd); err != nil || r.Code != lua.CodeOK {
				b.Fatalf("take: %+v %v", r, err)
			}
		}
	}
	return rids
}

// redisCPU is the CPU the redis-server has spent (user + system), in seconds.
func redisCPU(b *testing.B, c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, line := range strings.Split(info, "\r\n") {
		name, v, _ := strings.Cut(line, ":")
		if name == "used_cpu_user" || name == "used_cpu_sys" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu %q: %v", line, err)
			}
			total += f
		}
	}
	return total
}

// BenchmarkRedisProtocol is why the services speak RESP2 to the shards
// (shardpool.Protocol): the same q.lua grab in a pipeline of its own, one at a
// time, on a RESP3 and a RESP2 connection. go test -bench RedisProtocol -run ^$ ./internal/grab
func BenchmarkRedisProtocol(b *testing.B) {
	for _, protocol := range []int{3, 2} {
		b.Run(fmt.Sprintf("resp%d", protocol), func(b *testing.B) {
			client := redis.NewClient(&redis.Options{Addr: testenv.Stack(b).Redis[0], Protocol: protocol})
			defer client.Close()
			ctx := context.Background()
			if err := lua.Load(ctx, client); err != nil {
				b.Fatal(err)
			}
			key := benchPromotion(b, client)
			n := 0
			b.ReportAllocs()
			for b.Loop() {
				n++
				now := time.Now().UnixMilli()
				call := lua.GrabCall{NowMs: now, DeadlineMs: now + 3000, RequestID: fmt.Sprintf("rp%d-%d", protocol, n), BodyHash: "h",
					Pin: fmt.Sprintf("p%d", n), IP: "10.0.0.1", RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}}}
				p := client.Pipeline()
				cmd := lua.QueueGrab(ctx, p, call)
				if _, err := p.Exec(ctx); err != nil {
					b.Fatal(err)
				}
				if r, err := lua.ParseGrab(cmd); err != nil || r.Code != lua.CodeOK {
					b.Fatalf("%v %v", r, err)
				}
			}
		})
	}
}

// BenchmarkShardGrant is a grant's Redis side as the grab path makes it: a take,
// then its commit, through one shard's executor, 64 grants in flight, with the
// redis-server's CPU per grant. Compare builds with benchstat.
// go test -bench ShardGrant -run ^$ -count 6 ./internal/grab
func BenchmarkShardGrant(b *testing.B) {
	client := testenv.StartRedis(b, testenv.Volatile).Client()
	if err := lua.Load(context.Background(), client); err != nil {
		b.Fatal(err)
	}
	key := benchPromotion(b, client)
	var seq atomic.Int64
	onExec(b, client, func(ctx context.Context, e *shardExec) {
		rid := "g" + strconv.FormatInt(seq.Add(1), 10)
		now := time.Now().UnixMilli()
		r, err := lua.ParseGrab(e.take(ctx, lua.GrabCall{NowMs: now, DeadlineMs: now + 60_000, RequestID: rid, BodyHash: "h",
			Pin: rid, IP: "10.0.0.1", RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}}}))
		if err != nil || r.Code != lua.CodeOK {
			b.Fatalf("take %s: %+v %v", rid, r, err)
		}
		if code, err := e.commit(ctx, lua.CommitCall{RequestID: rid, Keys: []string{key}}); err != nil || code != lua.CommitCommitted {
			b.Fatalf("commit %s: %v %v", rid, code, err)
		}
	})
}
