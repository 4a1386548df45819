// Command grab-service answers the checkout service's grabs and cancels and the
// detail page's status polls. It only wires the packages under internal/.
package main

import (
	"context"
	"flag"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/grab-service/internal/grabendpoint"
	"github.com/flashsale/platform/grab-service/internal/grabtransport"
	"github.com/flashsale/platform/grab-service/internal/publish"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/lua"
)

func main() {
	log := svc.Logger("grab-service")
	if err := run(log); err != nil {
		log.Error("grab-service stopped", "err", err.Error())
		os.Exit(1)
	}
}

func run(logger *slog.Logger) error {
	var f svc.Flags
	fs := flag.NewFlagSet("grab-service", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:8080")
	cfg := grab.Defaults()
	nacos := configcenter.RegisterNacosFlags(fs)
	batch := fs.Duration("kafka-batch-timeout", 2*time.Millisecond, "longest a flow event waits for others to share its Kafka batch")
	reconcileEvery := fs.Duration("reconcile-every", time.Second, "interval of the reconciler's passes")
	fs.DurationVar(&cfg.ReconcileSweepEvery, "reconcile-sweep-every", cfg.ReconcileSweepEvery,
		"how often a reconciler pass scans every shard's whole keyspace for pending takes, rather than visiting the promotions MySQL lists")
	fs.DurationVar(&cfg.AnswerTimeout, "answer-timeout", cfg.AnswerTimeout, "bound on a grab or cancel, end to end")
	fs.IntVar(&cfg.Workers, "shard-workers", cfg.Workers, "pipelines in flight per shard")
	fs.IntVar(&cfg.MaxBatch, "shard-batch", cfg.MaxBatch, "most script calls coalesced into one pipeline (1 = no coalescing)")
	fs.IntVar(&cfg.RefusalCacheSize, "refusal-cache-size", cfg.RefusalCacheSize, "most promotions the local SOLD_OUT/STOPPED/ENDED/NOT_FOUND cache holds")
	fs.IntVar(&cfg.StatusCacheSize, "status-cache-size", cfg.StatusCacheSize, "most promotions the status cache holds")
	fs.Float64Var(&cfg.StatusRate, "status-rate", cfg.StatusRate,
		"shard reads per second for status answers not in the cache; past it the status route answers 429 RATE_LIMITED (0 = no limit)")
	maxInFlight := fs.Int("max-in-flight", 4096, "grabs and cancels one instance works on at once; past it they wait --queue-wait, then answer 503 UNAVAILABLE (0 = no bound)")
	queueWait := fs.Duration("queue-wait", 50*time.Millisecond, "longest a grab or cancel waits for a slot under --max-in-flight")
	pprofOn := fs.Bool("pprof", false, "serve net/http/pprof under /debug/pprof/ (for profiling; keep off in production)")
	_ = fs.Parse(os.Args[1:])

	tokens, err := svc.Tokens(f.Local, svc.TokenSpec{Env: "FLASHSALE_CHECKOUT_TOKEN", LocalDefault: "dev-checkout-token", Role: httpx.RoleCheckout})
	if err != nil {
		return err
	}
	pool, err := shardpool.New(f.Redis, redis.Options{PoolSize: 64, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	if err != nil {
		return err
	}
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range pool.Servers() {
		if err := lua.Load(ctx, c); err != nil {
			logger.Error("scripts not loaded yet; they load on first use", "err", err.Error())
		}
	}
	db, err := store.Open(ctx, f.MySQL)
	if err != nil {
		return err
	}
	defer db.Close()
	publisher := publish.NewKafka(f.Kafka, *batch)
	defer publisher.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	switches := configcenter.NewHolder()
	cfgMetrics := configcenter.NewMetrics(reg)

	shards := make([]redis.UniversalClient, 16)
	for i := range shards {
		shards[i] = pool.Client(i)
	}
	// The fence answers UNAVAILABLE for shards being rebuilt or lost (grab/fence.go).
	fence := grab.NewFence(shards, db.PromotionKeys, reg, logger)
	service, err := grab.New(cfg, grab.Deps{
		// kafkaDegrade routes flows straight into MySQL (publish/router.go).
		Shards: shards, Publisher: publish.NewRouter(publisher, db, switches, reg), Record: db, Switches: switches,
		Metrics: grab.NewMetrics(reg), Logger: logger, Fence: fence,
		// The reconciler's list each second: what ended over a day ago is the sweep's.
		PromotionKeys: func(ctx context.Context) ([]string, error) {
			return db.PromotionKeysEndingAfter(ctx, time.Now().Add(-24*time.Hour))
		},
	})
	if err != nil {
		return err
	}
	defer service.Close()
	// The reconciler settles what a crashed grab or cancel left open (grab/reconcile.go).
	reconciler := grab.NewReconciler(service)

	mux := http.NewServeMux()
	if *pprofOn {
		mountPprof(mux)
	}
	grabtransport.Handler(mux, grabendpoint.New(service, switches, grabendpoint.NewAdmission(*maxInFlight, *queueWait, reg)), tokens, httpx.NewRouteMetrics(reg, "grab"))
	required, advisory := readiness(pool, db.Ping, publisher.Ping, switches)
	httpx.OpsReadiness(mux, reg, switches.Info, required, advisory)

	g := svc.NewGroup(logger)
	g.HTTP(svc.Server(f.Listen, grabtransport.Readyz(fence.Status, httpx.RouteFallback(mux)), logger))
	g.Loop(func(ctx context.Context) error { return fence.Run(ctx, 200*time.Millisecond) })
	g.Loop(func(ctx context.Context) error { return reconciler.RunReconciler(ctx, *reconcileEvery) })
	g.Loop(func(ctx context.Context) error {
		return configcenter.Follow(ctx, nacos.Source(f.Switches, logger), switches, cfgMetrics, logger)
	})
	return g.Run()
}
