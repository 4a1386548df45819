// Command demo runs a flash sale against the local stack: it creates promotions
// through promo-admin, sends 20,000 buyers at a 1,000-unit promotion through
// grab-service, cancels a few orders, runs an envelope pool beside it (700 fans for
// 500 red envelopes sharing a budget), and prints the outcome and the invariant checks.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

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
	client := loadgen.Client(concurrency, 10*time.Second)
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
		body := map[string]any{"promoId": p.PromoID, "type": p.Type, "title": "demo " + p.PromoID, "total": p.Total,
			"perPinLimit": p.PerPin, "perIpLimit": p.PerIP, "maxPerGrab": 1,
			"startAt": time.Now().UTC().Add(-time.Second).Format(time.RFC3339), "endAt": time.Now().UTC().Add(time.Hour).Format(time.RFC3339)}
		if i == 1 {
			body["buckets"] = hotBuckets
		}
		a := loadgen.Do(ctx, client, st.Admin, loadgen.Call{Method: "POST", Path: "/v1/promotions", Body: body, Token: adminToken})
		if a.Status != http.StatusCreated {
			return fmt.Errorf("create %s: %d %s", p.PromoID, a.Status, a.Body)
		}
	}
	if err := showPromotions(ctx, client, st.Admin, adminToken, run); err != nil {
		return err
	}

	// On-call pauses the sale and resumes it, on the phone promotion.
	section("switches: on-call turns grabs off and on again")
	if err := showSwitchFlip(ctx, st, client, checkoutToken, specs[1].PromoID); err != nil {
		return err
	}

	// The flash sale.
	section(fmt.Sprintf("flash sale: %d buyers, %d units, %d at once", buyers, total, concurrency))
	grab := func(i int) loadgen.Call {
		ip := fmt.Sprintf("10.%d.%d.%d", i%7, (i/7)%250, i%3000/250)
		if i%10 == 0 {
			ip = "10.66.0.1" // a scalper farm behind one address meets the per-ip limit
		}
		return loadgen.Call{Method: "POST", Path: "/v1/grab", Token: checkoutToken, Body: map[string]any{
			"requestId": fmt.Sprintf("demo-%s-%d", run, i), "pin": fmt.Sprintf("buyer-%d", i), "ip": ip,
			"items": []map[string]any{{"promoId": sale.PromoID, "type": 1, "num": 1}}}}
	}
	start := time.Now()
	answers := loadgen.Run(ctx, loadgen.Config{BaseURL: st.Grab, Concurrency: concurrency, Calls: buyers, Label: "buyers"}, grab, nil)
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
		a := loadgen.Do(ctx, client, st.Grab, loadgen.Call{Method: "POST", Token: checkoutToken,
			Path: fmt.Sprintf("/v1/grab/demo-%s-%d/cancel", run, i), Body: map[string]any{"pin": fmt.Sprintf("buyer-%d", i), "reason": "PAYMENT_EXPIRED"}})
		if a.Result == "RETURNED" {
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
	if err := sellBucketed(ctx, st, client, checkoutToken, adminToken, run, specs[1].PromoID); err != nil {
		return err
	}

	section(fmt.Sprintf("an envelope pool beside the sale: %d fans for %d red envelopes", poolCrowd, poolEnvelopes))
	pool, err := sellPool(ctx, st, client, checkoutToken, adminToken, run)
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
func sellBucketed(ctx context.Context, st stack.File, client *http.Client, checkoutToken, adminToken, run, id string) error {
	const buyers = 500
	grab := func(i int) loadgen.Call {
		return loadgen.Call{Method: "POST", Path: "/v1/grab", Token: checkoutToken, Body: map[string]any{
			"requestId": fmt.Sprintf("demo-hot-%s-%d", run, i), "pin": fmt.Sprintf("fan-%d", i%buyers), "ip": fmt.Sprintf("10.77.%d.%d", i/250%250, i%250),
			"items": []map[string]any{{"promoId": id, "type": 1, "num": 1}}}}
	}
	answers := loadgen.Run(ctx, loadgen.Config{BaseURL: st.Grab, Concurrency: 64, Calls: 2 * buyers, Label: "fans"}, grab, nil)
	sum := loadgen.Summarize(answers, time.Second)
	for _, r := range sum.Results() {
		fmt.Printf("%-20s %8d\n", r, sum.ByResult[r])
	}
	a := loadgen.Do(ctx, client, st.Admin, loadgen.Call{Method: "GET", Path: "/v1/promotions/" + id + "/1", Token: adminToken})
	var p struct {
		Remaining, Granted int64
		BucketShards       []int   `json:"bucketShards"`
		BucketRemaining    []int64 `json:"bucketRemaining"`
	}
	if err := json.Unmarshal(a.Body, &p); err != nil || a.Status != http.StatusOK {
		return fmt.Errorf("get %s: %d %s", id, a.Status, a.Body)
	}
	fmt.Printf("granted %d, remaining %d; by bucket (shard: remaining):", p.Granted, p.Remaining)
	for b, shard := range p.BucketShards {
		fmt.Printf(" %d: %d", shard, p.BucketRemaining[b])
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

func showPromotions(ctx context.Context, client *http.Client, admin, token, run string) error {
	a := loadgen.Do(ctx, client, admin, loadgen.Call{Method: "GET", Path: "/v1/promotions?limit=50", Token: token})
	var page struct {
		Items []struct {
			Key       string `json:"key"`
			Shard     int    `json:"shard"`
			State     string `json:"state"`
			Total     int64  `json:"total"`
			Remaining int64  `json:"remaining"`
			Shards    []int  `json:"bucketShards"`
		} `json:"items"`
	}
	if err := json.Unmarshal(a.Body, &page); err != nil || a.Status != http.StatusOK {
		return fmt.Errorf("list promotions: %d %s", a.Status, a.Body)
	}
	fmt.Printf("%-26s %-12s %-8s %8s %9s\n", "key (Redis hash)", "shard(s)", "state", "total", "remaining")
	for _, p := range page.Items {
		if strings.HasSuffix(strings.TrimSuffix(strings.TrimSuffix(p.Key, "_1"), "_2"), run) {
			shards := fmt.Sprint(p.Shard)
			if len(p.Shards) > 0 { // in buckets, one per shard
				shards = strings.Trim(strings.Join(strings.Fields(fmt.Sprint(p.Shards)), ","), "[]")
			}
			fmt.Printf("%-26s %-12s %-8s %8d %9d\n", p.Key, shards, p.State, p.Total, p.Remaining)
		}
	}
	return nil
}
