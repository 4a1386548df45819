package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/lua"
	"github.com/flashsale/platform/tools/loadgen"
)

// bucketCounts are scenario 5's bucket counts.
var bucketCounts = []int{1, 2, 4, 8, 16}

// bucketsScope says what scenario 5 measures, in every report.
const bucketsScope = "Scenario 5 runs the bucketed grab (internal/bucket: the pin's home bucket, fall-over to donors, " +
	"each attempt's parts taken all or none and committed on their shards) from the bench process straight against the " +
	"16 shards, without HTTP or Kafka: grab-service does not route bucketed promotions yet. Bucketing is for a promotion " +
	"whose shard's core is the limit, which the shards never are on a machine this small, so the ratio is of Redis-bound " +
	"capacity: grants per script call on the busiest shard (INFO commandstats over a run of 5,000 grabs) at K buckets " +
	"against 1 bucket, with the busiest shard's main-thread CPU per grant as a cross-check (noisier: a shard at a " +
	"fraction of the load spends more CPU per call, as fewer calls share each read). The throughput run has no ip limit, so " +
	"a grab whose stock is at the pin's home touches one shard. Each K also sells out a small promotion (1,000 units, perPin 1, perIp 2, repeated pins and ips) " +
	"and checks that exactly its total was granted, every bucket ends at 0 and no pin or ip holds more than its limit " +
	"over all buckets."

// bucketRow is one bucket count of scenario 5.
type bucketRow struct {
	K int
	F figures // stock that never runs out
	// Busiest is the busiest shard's load per grant over a fixed run: what bounds
	// one promotion when Redis is the limit.
	Busiest     shardLoad
	Tries       float64 // Redis attempts per grab in the sell-out check
	SellOut     string  // the sell-out check's verdict
	SellOutPass bool
}

// buckets is scenario 5: one hot promotion split into K buckets on K shards.
func (b *bench) buckets(ctx context.Context) error {
	shards := make([]redis.UniversalClient, len(b.shards))
	for i, c := range b.shards {
		shards[i] = c
	}
	for _, k := range bucketCounts {
		g := &bucket.Grabber{Shards: shards, Ring: ring.Default, EmptyTTL: 500 * time.Millisecond}
		key := promo.Key(fmt.Sprintf("%s-bk%d", b.id, k), 1)
		if err := bucket.Create(ctx, shards, ring.Default, key, k, bucketSpec(promo.MaxTotal, 1, 0)); err != nil {
			return err
		}
		b.settle(20 * time.Second)
		s := measure(ctx, bucketRun(g, key, k, b.id+"-h", 0, nil), fmt.Sprintf("%d buckets", k), b.conc, b.dur)
		report(s.Summary)
		busiest, err := busiestShard(ctx, b.shards, bucketRun(g, key, k, b.id+"-c", 0, nil), b.conc)
		if err != nil {
			return err
		}
		if err := bucket.Delete(ctx, shards, ring.Default, key, k); err != nil {
			return err
		}
		row := bucketRow{K: k, F: figuresOf(s.Summary), Busiest: busiest}
		if err := b.bucketSellOut(ctx, shards, k, &row); err != nil {
			return err
		}
		b.res.Buckets = append(b.res.Buckets, row)
	}
	one, last := b.res.Buckets[0], b.res.Buckets[len(b.res.Buckets)-1]
	b.res.add(ratioRow{N: 5, Scenario: fmt.Sprintf("hot promotion in %d buckets on %d shards vs 1 bucket: Redis-bound capacity", last.K, last.K),
		Ours: 1000 / last.Busiest.Calls, OursUnit: fmt.Sprintf("grants per 1,000 script calls on the busiest shard, %d buckets", last.K),
		Base: 1000 / one.Busiest.Calls, BaseUnit: "the same, 1 bucket",
		Detail: fmt.Sprintf("by the busiest shard's CPU per grant %s; measured GRANTED/s on this machine %s with %d buckets, %s with 1 (table 5)",
			ratioText(one.Busiest.CPUus/last.Busiest.CPUus), num(last.F.Granted), last.K, num(one.F.Granted))})
	return nil
}

// busiestRun is the number of grabs busiestShard sends.
const busiestRun = 5000

// shardLoad is what one shard's Redis did: script calls (EVALSHA and EVAL) and
// main-thread CPU in µs, or, in a bucketRow, the busiest shard's of each per grant.
type shardLoad struct{ Calls, CPUus float64 }

// busiestShard runs busiestRun grabs of r and returns, per grant, the script calls
// of the shard that ran the most and the CPU of the shard that spent the most (INFO
// before and after; the shards' other clients add a little, alike for every K).
// Calls are exact and the same on every machine; CPU weighs each call by its cost.
func busiestShard(ctx context.Context, shards []*redis.Client, r runner, conc int) (shardLoad, error) {
	before, err := shardLoads(ctx, shards)
	if err != nil {
		return shardLoad{}, err
	}
	answers, _ := r(ctx, "", conc, busiestRun)
	after, err := shardLoads(ctx, shards)
	if err != nil {
		return shardLoad{}, err
	}
	granted := 0
	for _, a := range answers {
		if a.Result == "GRANTED" {
			granted++
		}
	}
	var most shardLoad
	for i := range before {
		most.Calls = max(most.Calls, after[i].Calls-before[i].Calls)
		most.CPUus = max(most.CPUus, after[i].CPUus-before[i].CPUus)
	}
	n := float64(max(granted, 1))
	return shardLoad{Calls: most.Calls / n, CPUus: most.CPUus / n}, nil
}

// shardLoads is each shard's script calls and main-thread CPU so far.
func shardLoads(ctx context.Context, shards []*redis.Client) ([]shardLoad, error) {
	out := make([]shardLoad, len(shards))
	for i, c := range shards {
		info, err := c.Info(ctx, "cpu", "commandstats").Result()
		if err != nil {
			return nil, fmt.Errorf("shard %d: info: %w", i, err)
		}
		for _, line := range strings.Split(info, "\n") {
			name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok {
				continue
			}
			switch name {
			case "used_cpu_user_main_thread", "used_cpu_sys_main_thread":
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return nil, fmt.Errorf("shard %d: info %s: %w", i, name, err)
				}
				out[i].CPUus += f * 1e6
			case "cmdstat_evalsha", "cmdstat_eval": // calls=N,usec=...
				calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
				n, err := strconv.ParseFloat(calls, 64)
				if err != nil {
					return nil, fmt.Errorf("shard %d: info %s: %w", i, name, err)
				}
				out[i].Calls += n
			}
		}
	}
	return out, nil
}

// bucketSpec is a running promotion with the given total and limits.
func bucketSpec(total, perPin, perIP int64) lua.AdminSpec {
	now := time.Now().UnixMilli()
	return lua.AdminSpec{Ver: 1, Total: total, PerPin: perPin, PerIP: perIP, MaxPerGrab: 1,
		StartMs: now - 60_000, EndMs: now + 3_600_000, State: "ACTIVE"}
}

// bucketRun grabs one unit of the bucketed promotion per call. With pinPool 0
// every call is a new pin, else pins (and ips, half as many) repeat; tries, when
// given, counts the attempts on Redis.
func bucketRun(g *bucket.Grabber, key string, k int, run string, pinPool int64, tries *atomic.Int64) runner {
	return funcRun(func(ctx context.Context, n int64) string {
		pin, ip := "p"+strconv.FormatInt(n, 10), "198.19."+strconv.FormatInt(n/250%250, 10)+"."+strconv.FormatInt(n%250, 10)
		if pinPool > 0 {
			pin, ip = "p"+strconv.FormatInt(n%pinPool, 10), "198.20."+strconv.FormatInt(n%(pinPool/2), 10)
		}
		now := time.Now()
		rid := run + strconv.FormatInt(n, 10)
		r, err := g.Grab(ctx, bucket.Request{Key: key, Buckets: k, RequestID: rid, BodyHash: rid,
			Pin: pin, IP: ip, Num: 1, Now: now, Deadline: now.Add(time.Hour), RateFactorPermille: 1000})
		if tries != nil {
			tries.Add(int64(r.Tries))
		}
		return scriptAnswer(r.Code, err)
	})
}

// bucketSweep grabs with fresh buyers, one at a time and with a grabber that
// knows no bucket empty, until one is refused SOLD_OUT: with nothing else in
// flight that refusal found every bucket empty on Redis. A concurrent wave may
// leave units behind a known-empty mark (a bucket briefly empty while another
// grab's part held its last unit, given back when that grab was refused
// elsewhere); the sweep sells them. It returns the units it was granted.
func bucketSweep(ctx context.Context, shards []redis.UniversalClient, key string, k int, run string) int {
	r := bucketRun(&bucket.Grabber{Shards: shards, Ring: ring.Default}, key, k, run, 0, nil)
	for n := 0; ; n++ {
		answers, _ := r(ctx, "", 1, 1)
		if len(answers) == 0 || answers[0].Result != "GRANTED" {
			return n
		}
	}
}

// bucketSellOut sells out a small bucketed promotion and checks its invariants.
func (b *bench) bucketSellOut(ctx context.Context, shards []redis.UniversalClient, k int, row *bucketRow) error {
	const total, perPin, perIP, pinPool = 1000, 1, 2, 1100
	key := promo.Key(fmt.Sprintf("%s-bs%d", b.id, k), 1)
	if err := bucket.Create(ctx, shards, ring.Default, key, k, bucketSpec(total, perPin, perIP)); err != nil {
		return err
	}
	defer func() { _ = bucket.Delete(context.Background(), shards, ring.Default, key, k) }()
	g := &bucket.Grabber{Shards: shards, Ring: ring.Default, EmptyTTL: 500 * time.Millisecond}
	var tries atomic.Int64
	run := bucketRun(g, key, k, b.id+"-s", pinPool, &tries)
	answers, _ := run(ctx, fmt.Sprintf("sell-out, %d buckets", k), b.conc, 4*pinPool)
	s := loadgen.Summarize(sent(answers), time.Second)
	granted := s.ByResult["GRANTED"] + bucketSweep(ctx, shards, key, k, b.id+"-w")
	var problems []string
	if granted != total {
		problems = append(problems, fmt.Sprintf("granted %d of %d", granted, total))
	}
	if rem, err := bucket.Remaining(ctx, shards, ring.Default, key, k); err != nil || rem != 0 {
		problems = append(problems, fmt.Sprintf("remaining %d (%v)", rem, err))
	}
	for _, c := range []struct {
		companion func(string) string
		limit     int64
		what      string
	}{{promo.PinsKey, perPin, "pin"}, {promo.IPsKey, perIP, "ip"}} {
		held, err := bucket.Held(ctx, shards, ring.Default, key, k, c.companion)
		if err != nil {
			return err
		}
		var sum int64
		for who, n := range held {
			sum += n
			if n > c.limit {
				problems = append(problems, fmt.Sprintf("%s %s holds %d, limit %d", c.what, who, n, c.limit))
			}
		}
		if sum != int64(granted) {
			problems = append(problems, fmt.Sprintf("%s counters sum to %d, granted %d", c.what, sum, granted))
		}
	}
	row.Tries = float64(tries.Load()) / float64(max(s.Calls, 1))
	row.SellOutPass = len(problems) == 0
	row.SellOut = fmt.Sprintf("%d granted of %d (%s)", granted, total, resultMix(s))
	if !row.SellOutPass {
		row.SellOut = "FAIL: " + strings.Join(problems, "; ")
		fmt.Fprintln(os.Stderr, "   bucket sell-out check failed:", row.SellOut)
	}
	return nil
}
