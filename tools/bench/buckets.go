package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
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
const bucketsScope = "Scenario 5 sells one hot promotion created through promo-admin in K buckets on K shards " +
	"(docs/CONTRACT.md, \"Buckets\") end to end through grab-service: HTTP, the claim, each grab's parts taken on the " +
	"pin's home bucket (falling over to the others when it is sold out), the Kafka acknowledgement, the commit. " +
	"Bucketing is for a promotion whose shard's core is the limit, which the shards never are on a machine this small " +
	"(grab-service and the load generator share its two cores), so the ratio is of Redis-bound capacity: grants per " +
	"script call on the busiest shard (INFO commandstats over a run of 5,000 grabs) at K buckets against 1 bucket, with " +
	"the busiest shard's main-thread CPU per grant as a cross-check (noisier: a shard at a fraction of the load spends more " +
	"CPU per call, as fewer calls share each read). The throughput run has no pin or ip limit. Each K also sells out a " +
	"small promotion (1,000 units, perPin 1, perIp 2, repeated pins and ips) through grab-service and checks that exactly " +
	"its total was granted, every bucket ends at 0 and no pin or ip holds more than its limit over all buckets; its " +
	"fall-overs per grab are grab-service's own count (flashsale_grab_bucket_fall_overs_total)."

// bucketRow is one bucket count of scenario 5.
type bucketRow struct {
	K int
	F figures // stock that never runs out
	// Busiest is the busiest shard's load per grant over a fixed run: what bounds
	// one promotion when Redis is the limit.
	Busiest     shardLoad
	FallOvers   float64 // grab-service's fall-overs per grab in the sell-out check
	SellOut     string  // the sell-out check's verdict
	SellOutPass bool
}

// buckets is scenario 5: one hot promotion split into K buckets on K shards.
func (b *bench) buckets(ctx context.Context) error {
	for _, k := range bucketCounts {
		id := fmt.Sprintf("%s-bk%d", b.id, k)
		if err := b.admin.createIn(ctx, id, unlimited, k, nil); err != nil {
			return err
		}
		b.settle(20 * time.Second)
		s := measure(ctx, b.bucketRun(id, k, fmt.Sprintf("%s-h%d", b.id, k), pinPool), fmt.Sprintf("%d buckets", k), b.conc, b.dur)
		report(s.Summary)
		busiest, err := busiestShard(ctx, b.shards, b.bucketRun(id, k, fmt.Sprintf("%s-c%d", b.id, k), pinPool), b.conc)
		if err != nil {
			return err
		}
		// Its takes are all committed or settled by now; deleting it keeps the
		// scenario's million-unit promotion out of the next one's way.
		if err := b.admin.remove(ctx, id); err != nil {
			return err
		}
		row := bucketRow{K: k, F: figuresOf(s.Summary), Busiest: busiest}
		if err := b.bucketSellOut(ctx, k, &row); err != nil {
			return err
		}
		b.res.Buckets = append(b.res.Buckets, row)
	}
	one, last := b.res.Buckets[0], b.res.Buckets[len(b.res.Buckets)-1]
	b.res.add(ratioRow{N: 5, Scenario: fmt.Sprintf("hot promotion in %d buckets on %d shards vs 1 bucket, through grab-service: Redis-bound capacity", last.K, last.K),
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

// bucketRun grabs one unit of promotion id, in k buckets, through grab-service per
// call, buyer n being pin n mod pins and ip n mod pins/2; its requestId derived
// beside the pin's home bucket unless --random-request-ids.
func (b *bench) bucketRun(id string, k int, run string, pins int64) runner {
	return httpRun(b.st.Grab, func(n int64) loadgen.Call {
		body := buyerBodyIn(run, id, k, n, n%pins, n%(pins/2), "198.19.", randomRequestIDs)
		return loadgen.Call{Method: "POST", Path: "/v1/grab", Token: b.token, Body: body, Attempt: 1}
	}, nil)
}

// bucketSweep grabs, one at a time with buyers not seen before, until one is
// refused SOLD_OUT, past the time grab-service trusts a bucket it saw sold out: a
// concurrent wave may leave units behind such a mark (a bucket briefly empty
// while another grab's part held its last unit, given back when that grab was
// refused elsewhere). It returns the units it was granted.
func (b *bench) bucketSweep(ctx context.Context, id string, k int, run string) int {
	time.Sleep(time.Second)
	r := b.bucketRun(id, k, run, 1<<40)
	for n := 0; ; n++ {
		answers, _ := r(ctx, "", 1, 1)
		if len(answers) == 0 || answers[0].Result != "GRANTED" {
			return n
		}
	}
}

// bucketSellOut sells out a small bucketed promotion through grab-service and
// checks its invariants on the buckets themselves.
func (b *bench) bucketSellOut(ctx context.Context, k int, row *bucketRow) error {
	const total, perPin, perIP, pins = 1000, 1, 2, 1100
	id := fmt.Sprintf("%s-bs%d", b.id, k)
	if err := b.admin.createIn(ctx, id, total, k, map[string]any{"perPinLimit": perPin, "perIpLimit": perIP}); err != nil {
		return err
	}
	defer func() { _ = b.admin.remove(context.Background(), id) }()
	before := b.fallOvers(ctx)
	answers, _ := b.bucketRun(id, k, fmt.Sprintf("%s-s%d", b.id, k), pins)(ctx, fmt.Sprintf("sell-out, %d buckets", k), b.conc, 4*pins)
	s := loadgen.Summarize(sent(answers), time.Second)
	row.FallOvers = (b.fallOvers(ctx) - before) / float64(max(s.Calls, 1))
	granted := s.ByResult["GRANTED"] + b.bucketSweep(ctx, id, k, fmt.Sprintf("%s-w%d", b.id, k))
	shards := make([]redis.UniversalClient, len(b.shards))
	for i, c := range b.shards {
		shards[i] = c
	}
	key := promo.Key(id, 1)
	var problems []string
	if granted != total {
		problems = append(problems, fmt.Sprintf("granted %d of %d", granted, total))
	}
	if rem, err := lua.RemainingOfBuckets(ctx, shards, ring.Default, key, k); err != nil || rem != 0 {
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
	row.SellOutPass = len(problems) == 0
	row.SellOut = fmt.Sprintf("%d granted of %d (%s)", granted, total, resultMix(s))
	if !row.SellOutPass {
		row.SellOut = "FAIL: " + strings.Join(problems, "; ")
		fmt.Fprintln(os.Stderr, "   bucket sell-out check failed:", row.SellOut)
	}
	return nil
}

// fallOvers is grab-service's count of bucket fall-overs so far (its ops listener's /metrics), 0
// when it cannot be read: the figure is a detail, not a verdict.
func (b *bench) fallOvers(ctx context.Context) float64 {
	const name = "flashsale_grab_bucket_fall_overs_total "
	a := loadgen.Do(ctx, loadgen.Client(1, 5*time.Second), b.st.Ops.Grab, loadgen.Call{Method: "GET", Path: "/metrics"})
	for _, line := range strings.Split(string(a.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}
