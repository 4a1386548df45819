// Command grab-service answers the checkout service's grabs and cancels and the
// detail page's status polls. It parses its flags and runs what internal/app wires.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"time"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/app"
	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/svc"
)

func main() {
	log := svc.Logger("grab-service")
	if err := run(log); err != nil {
		log.Error("grab-service stopped", "err", err.Error())
		os.Exit(1)
	}
}

func run(logger *slog.Logger) error {
	f := svc.Flags{MaxConns: 10000}
	fs := flag.NewFlagSet("grab-service", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:8080", "127.0.0.1:9180")
	cfg := grab.Defaults()
	nacos := configcenter.RegisterNacosFlags(fs)
	promo.IPv6PrefixFlag(fs)
	batch := fs.Duration("kafka-batch-timeout", 2*time.Millisecond, "longest a flow event waits for others to share its Kafka batch")
	reconcileEvery := fs.Duration("reconcile-every", time.Second, "interval of the reconciler's passes")
	fs.DurationVar(&cfg.ReconcileSweepEvery, "reconcile-sweep-every", cfg.ReconcileSweepEvery,
		"how often a reconciler pass scans every shard's whole keyspace for pending takes, rather than visiting the promotions MySQL lists")
	fs.DurationVar(&cfg.AnswerTimeout, "answer-timeout", cfg.AnswerTimeout, "bound on a grab or cancel, end to end")
	fs.BoolVar(&cfg.FoldClaim, "fold-claim", cfg.FoldClaim, "claim a requestId in its take's own script call when the ring puts both on one shard")
	fs.IntVar(&cfg.Workers, "shard-workers", cfg.Workers, "pipelines in flight per shard")
	fs.IntVar(&cfg.MaxBatch, "shard-batch", cfg.MaxBatch, "most script calls coalesced into one pipeline (1 = no coalescing)")
	fs.DurationVar(&cfg.CommitLinger, "commit-linger", cfg.CommitLinger, "longest a grant's commit waits for a take of its promotions on its shard to ride (0 = the next pipeline)")
	fs.IntVar(&cfg.RefusalCacheSize, "refusal-cache-size", cfg.RefusalCacheSize, "most promotions the local SOLD_OUT/STOPPED/ENDED/NOT_FOUND cache holds")
	fs.IntVar(&cfg.StatusCacheSize, "status-cache-size", cfg.StatusCacheSize, "most promotions the status cache holds")
	fs.Float64Var(&cfg.StatusRate, "status-rate", cfg.StatusRate,
		"shard reads per second for status answers not in the cache; past it the status route answers 429 RATE_LIMITED (0 = no limit)")
	maxInFlight := fs.Int("max-in-flight", 4096, "grabs and cancels one instance works on at once; past it they wait --queue-wait, then answer 503 UNAVAILABLE (0 = no bound)")
	queueWait := fs.Duration("queue-wait", 50*time.Millisecond, "longest a grab or cancel waits for a slot under --max-in-flight")
	pprofOn := fs.Bool("pprof", false, "serve net/http/pprof under /debug/pprof/ on the ops listener (for profiling)")
	_ = fs.Parse(os.Args[1:])

	tokens, err := svc.Tokens(f.Local, svc.TokenSpec{Env: "FLASHSALE_CHECKOUT_TOKEN", LocalDefault: "dev-checkout-token", Role: httpx.RoleCheckout})
	if err != nil {
		return err
	}
	redisAuth, kafkaAuth, err := kafkaauth.BackendsFromEnv()
	if err != nil {
		return err
	}
	switches, err := nacos.Source(f.Switches, logger)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := app.New(ctx, app.Config{
		RedisAddrs: f.Redis, RedisSentinels: f.RedisSentinels, SentinelPrefix: f.RedisSentinelPrefix, RedisAllow: f.RedisAllow, RedisAuth: redisAuth, KafkaAuth: kafkaAuth, MySQLDSN: f.MySQL, MySQLSkipMigrations: !f.MySQLMigrate, KafkaBrokers: f.Kafka, KafkaBatchTimeout: *batch,
		Tokens: tokens, Logger: logger, Grab: cfg, MaxInFlight: *maxInFlight, QueueWait: *queueWait,
		ReconcileEvery: *reconcileEvery, Pprof: *pprofOn, Switches: switches,
	})
	if err != nil {
		return err
	}
	defer a.Close()

	g := svc.NewGroup(logger)
	conns := svc.NewConnMetrics(a.Registry)
	g.HTTP(svc.Server(f.Listen, a.Handler, logger), conns.Limit("api", f.MaxConns))
	g.HTTP(svc.OpsServer(f.OpsListen, a.Ops, logger), conns.Limit("ops", f.MaxConns))
	g.Loop(a.RunFence)
	g.Loop(a.RunSentinels)  // follows the masters Redis Sentinel elects, when it runs
	g.Loop(a.RunReconciler) // settles what a crashed grab or cancel left open
	g.Loop(a.FollowSwitches)
	return g.Run()
}
