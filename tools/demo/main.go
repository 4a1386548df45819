// Command demo runs a flash sale against the local stack: it creates promotions
// through promo-admin, sends 20,000 buyers at a 1,000-unit promotion through
// grab-service, cancels a few orders, runs an envelope pool beside it (700 fans for
// 500 red envelopes sharing a budget), shows a promotion sold on the app only
// refusing a grab through the main site, and prints the outcome and the invariant
// checks.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/client"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/stack"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/tools/invariants"
	"github.com/flashsale/platform/tools/loadgen"
)

func main() {
	stackFile := flag.String("stack", "", "stack file written by `make up` (default .run/stack.json)")
	buyers := flag.Int("buyers", 20000, "buyers, one grab each")
	total := flag.Int64("total", 1000, "units of the sale's promotion")
	concurrency := flag.Int("concurrency", 200, "buyers pressing at once")
	cancels := flag.Int("cancels", 50, "granted orders cancelled after the sale")
	flag.Parse()
	if err := run(*stackFile, *buyers, *total, *concurrency, *cancels); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(stackFile string, buyers int, total int64, concurrency, cancels int) error {
	ctx := context.Background()
	st, err := stack.Load(stackFile)
	if err != nil {
		return err
	}
	adminToken := env("FLASHSALE_ADMIN_TOKEN", "dev-admin-token")
	checkoutToken := env("FLASHSALE_CHECKOUT_TOKEN", "dev-checkout-token")
	pf, err := newPlatform(st, loadgen.Client(concurrency, 10*time.Second), checkoutToken, adminToken)
	if err != nil {
		return err
	}
	run := time.Now().UTC().Format("150405")

	// A few promotions on different shards, as merchandisers would create them.
	section("promotions")
	sale := invariants.Promotion{PromoID: "sale-" + run, Type: 1, Total: total, PerPin: 1, PerIP: 5}
	specs := []invariants.Promotion{sale,
		{PromoID: "phone-" + run, Type: 1, Total: 300, PerPin: 2},
		{PromoID: "tv-" + run, Type: 1, Total: 50, PerPin: 1},
		{PromoID: "coffee-" + run, Type: 2, Total: 5000, PerPin: 5}}
	const hotBuckets = 4 // the phone is the day's hot sale: its stock on 4 shards (docs/CONTRACT.md, "Buckets")
	for i, p := range specs {
		spec := client.PromotionSpec{PromoID: p.PromoID, Type: p.Type, Title: "demo " + p.PromoID, Total: p.Total,
			PerPinLimit: p.PerPin, PerIPLimit: p.PerIP, MaxPerGrab: 1}
		if i == 1 {
			spec.Buckets = hotBuckets
		}
		if err := pf.create(ctx, spec); err != nil {
			return err
		}
	}
	if err := showPromotions(ctx, pf.admin, run); err != nil {
		return err
	}

	section("channels: a promotion sold on the app only")
	if err := showChannels(ctx, pf, run); err != nil {
		return err
	}

	// On-call pauses the sale and resumes it, on the phone promotion.
	section("switches: on-call turns grabs off and on again")
	if err := showSwitchFlip(ctx, st, pf, specs[1].PromoID); err != nil {
		return err
	}

	// The flash sale.
	section(fmt.Sprintf("flash sale: %d buyers, %d units, %d at once", buyers, total, concurrency))
	buyer := func(i int) client.GrabRequest {
		ip := fmt.Sprintf("10.%d.%d.%d", i%7, (i/7)%250, i%3000/250)
		if i%10 == 0 {
			ip = "10.66.0.1" // a scalper farm behind one address meets the per-ip limit
		}
		return client.GrabRequest{RequestID: fmt.Sprintf("demo-%s-%d", run, i), Pin: fmt.Sprintf("buyer-%d", i), IP: ip,
			Items: []client.Item{{PromoID: sale.PromoID, Type: 1, Num: 1}}}
	}
	start := time.Now()
	answers, _ := pf.crowd(ctx, buyers, concurrency, "buyers", buyer)
	sum := loadgen.Summarize(answers, time.Since(start))

	told := invariants.Told{PerPin: map[string]int64{}}
	var granted []int
	for i, a := range answers {
		if a.Result == "GRANTED" {
			told.Units++
			told.PerPin[fmt.Sprintf("buyer-%d", i)]++
			granted = append(granted, i)
		}
	}
	// Some buyers do not pay: their orders are cancelled and the stock returns.
	returned := 0
	for _, i := range granted[:min(cancels, len(granted))] {
		if pf.cancel(ctx, fmt.Sprintf("demo-%s-%d", run, i), fmt.Sprintf("buyer-%d", i)).result == "RETURNED" {
			returned++
			told.Units--
			told.PerPin[fmt.Sprintf("buyer-%d", i)]--
		}
	}
	for pin, n := range told.PerPin {
		if n == 0 {
			delete(told.PerPin, pin)
		}
	}

	fmt.Printf("%-20s %8s\n", "answer", "count")
	for _, r := range sum.Results() {
		fmt.Printf("%-20s %8d\n", r, sum.ByResult[r])
	}
	fmt.Printf("%-20s %8d\n", "cancelled (RETURNED)", returned)
	fmt.Printf("\nthroughput %.0f answers/s over %s; latency p50 %s, p99 %s, p99.9 %s\n",
		sum.Throughput(), sum.Elapsed.Round(time.Millisecond), sum.P50.Round(time.Microsecond), sum.P99.Round(time.Microsecond), sum.P999.Round(time.Microsecond))

	section(fmt.Sprintf("the hot sale in %d buckets: 500 buyers, 2 each at most, for its 300 units", hotBuckets))
	if err := sellBucketed(ctx, st, pf, run, specs[1].PromoID); err != nil {
		return err
	}

	section(fmt.Sprintf("an envelope pool beside the sale: %d fans for %d red envelopes", poolCrowd, poolEnvelopes))
	pool, err := sellPool(ctx, pf, run)
	if err != nil {
		return err
	}

	section("invariants (docs/CONTRACT.md)")
	shards := make([]*redis.Client, len(st.Redis))
	for i, addr := range st.Redis {
		shards[i] = redis.NewClient(&redis.Options{Addr: addr})
		defer shards[i].Close()
	}
	checker := invariants.Checker{Shard: func(key string) redis.UniversalClient { return shards[ring.Default.Shard(key)] }, Settle: 15 * time.Second}
	if db, err := store.Open(ctx, st.MySQLDSN); err == nil {
		defer db.Close()
		if st.Pids["flow-sink"] > 0 {
			checker.DB = db
		}
	}
	failed := false
	results := checker.Check(ctx, sale, told)
	if checker.DB != nil { // the pool's check reads the record
		results = append(results, checkPool(ctx, st, shards, checker.DB, pool))
	}
	for _, r := range results {
		fmt.Println(r)
		failed = failed || !r.Pass
	}
	if failed {
		return fmt.Errorf("an invariant failed")
	}

	section("recovery: lose the sale's shard, rebuild it from MySQL")
	if st.Pids["flow-sink"] <= 0 {
		fmt.Println("skipped: the flow sink is not running, so MySQL is not the record yet")
		return nil
	}
	key := promo.Key(sale.PromoID, sale.Type)
	shard := ring.Default.Shard(key)
	return loseAndRebuild(ctx, st, stackFile, shard, shards[shard], key)
}

func section(title string) { fmt.Printf("\n== %s\n", title) }

// sellBucketed sells the bucketed promotion id out to 500 buyers pressing twice
// and shows where its units came from: every bucket emptied, buyers whose home
// bucket ran dry served by the others.
func sellBucketed(ctx context.Context, st stack.File, pf platform, run, id string) error {
	const buyers = 500
	fan := func(i int) client.GrabRequest {
		return client.GrabRequest{RequestID: fmt.Sprintf("demo-hot-%s-%d", run, i), Pin: fmt.Sprintf("fan-%d", i%buyers), IP: fmt.Sprintf("10.77.%d.%d", i/250%250, i%250),
			Items: []client.Item{{PromoID: id, Type: 1, Num: 1}}}
	}
	answers, _ := pf.crowd(ctx, 2*buyers, 64, "fans", fan)
	sum := loadgen.Summarize(answers, time.Second)
	for _, r := range sum.Results() {
		fmt.Printf("%-20s %8d\n", r, sum.ByResult[r])
	}
	p, err := pf.admin.Get(ctx, id, 1)
	if err != nil {
		return fmt.Errorf("get %s: %w", id, err)
	}
	fmt.Printf("granted %d, remaining %d; by bucket (shard: remaining):", p.Granted, p.Remaining)
	for b, shard := range p.BucketShards {
		if b < len(p.BucketRemaining) {
			fmt.Printf(" %d: %d", shard, p.BucketRemaining[b])
		}
	}
	fmt.Println()
	if p.Granted != 300 || p.Remaining != 0 {
		return fmt.Errorf("the hot sale granted %d with %d left, want all 300", p.Granted, p.Remaining)
	}
	// Its buckets emptied one by one on their own shards; the price system hears one
	// SOLD_OUT, when the last one did.
	states, err := showStateEvents(ctx, st.Kafka, promo.Key(id, 1), 1)
	if err != nil {
		return err
	}
	if states[0] != "SOLD_OUT" {
		return fmt.Errorf("the hot sale announced %s, want SOLD_OUT", states[0])
	}
	return nil
}

func showPromotions(ctx context.Context, admin *client.Admin, run string) error {
	page, err := admin.List(ctx, client.ListOptions{Limit: 50})
	if err != nil {
		return fmt.Errorf("list promotions: %w", err)
	}
	fmt.Printf("%-26s %-12s %-8s %8s %9s\n", "key (Redis hash)", "shard(s)", "state", "total", "remaining")
	for _, p := range page.Items {
		if strings.HasSuffix(strings.TrimSuffix(strings.TrimSuffix(p.Key, "_1"), "_2"), run) {
			shards := fmt.Sprint(p.Shard)
			if len(p.BucketShards) > 0 { // in buckets, one per shard
				shards = strings.Trim(strings.Join(strings.Fields(fmt.Sprint(p.BucketShards)), ","), "[]")
			}
			fmt.Printf("%-26s %-12s %-8s %8d %9d\n", p.Key, shards, p.State, p.Total, p.Remaining)
		}
	}
	return nil
}
