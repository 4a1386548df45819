// Package app wires grab-service from the inside out: the shard pool, the record,
// the flow publishers, the fence, the service and its reconciler, the endpoints
// and the HTTP handler. main and the component tests build the same thing through New.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
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
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/promostate"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/lua"
)

// Config is everything grab-service is told (main fills it from its flags);
// nothing is read from the environment here.
type Config struct {
	RedisAddrs []string // 16 entries, index = logical shard
	// RedisSentinels, when set, elect each shard's master, monitored as
	// SentinelPrefix plus the shard; on-call's shardAddrs still win.
	RedisSentinels []string
	SentinelPrefix string
	// RedisAllow is the servers on-call's shardAddrs may name (shardpool.Allowlist).
	RedisAllow []string
	MySQLDSN   string
	// MySQLSkipMigrations connects to the record without applying the migrations
	// (store.Connect, svc.Flags.MySQLMigrate off); zero applies them (store.Open).
	MySQLSkipMigrations bool
	KafkaBrokers        []string
	// RedisAuth is the shards' ACL user and TLS (svc.RedisAuthFromEnv); zero: none.
	RedisAuth svc.RedisAuth
	// KafkaAuth is SASL and TLS to the brokers (kafkaauth.FromEnv); zero: none.
	KafkaAuth         kafkaauth.Auth
	KafkaBatchTimeout time.Duration
	Tokens            httpx.Tokens
	Logger            *slog.Logger
	Grab              grab.Config
	// MaxInFlight and QueueWait bound the grabs and cancels in flight (0: no bound).
	MaxInFlight int
	QueueWait   time.Duration
	// ReconcileEvery is the interval of the reconciler's passes (RunReconciler).
	ReconcileEvery time.Duration
	// Pprof serves net/http/pprof under /debug/pprof/ on the ops listener.
	Pprof bool
	// Switches is where the on-call switches are read from (FollowSwitches); nil
	// follows none and the defaults stay in force.
	Switches configcenter.Source
	// Hook, when set (tests), has the last word on the service's config and deps
	// before it is built: a clock, private shards, faults, a publisher that records.
	// kafka is the Kafka publisher that d.Publisher (a publish.Router) routes to.
	Hook func(c *grab.Config, d *grab.Deps, kafka grab.Publisher)
}

// App is a wired grab-service.
type App struct {
	Service    *grab.Grabber
	Reconciler *grab.Reconciler
	Fence      *grab.Fence // nil when a Hook took it away
	Store      *store.Store
	Pool       *shardpool.Pool
	Kafka      *publish.Kafka
	States     *promostate.Announcer
	Registry   *prometheus.Registry
	// Switches holds the switches document in force.
	Switches *configcenter.Holder
	// Handler is the public API's (and the probes'); Ops the ops listener's:
	// /metrics, the probes, pprof with Config.Pprof (httpx.OpsHandler).
	Handler, Ops http.Handler

	cfg             Config
	switchesMetrics *configcenter.Metrics
	log             *slog.Logger
	sentinels       func(context.Context) error // shardpool.FollowSentinels' loop
}

// New builds the app. It does not wait for Redis or Kafka: the scripts load on
// first use when they cannot load now, and /readyz reports what does not answer.
func New(ctx context.Context, cfg Config) (*App, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	pool, err := openPool(ctx, cfg)
	if err != nil {
		return nil, err
	}
	db, err := store.OpenWith(ctx, cfg.MySQLDSN, !cfg.MySQLSkipMigrations)
	if err != nil {
		pool.Close()
		return nil, err
	}
	a := &App{Store: db, Pool: pool, Kafka: publish.NewKafka(cfg.KafkaBrokers, cfg.KafkaBatchTimeout, cfg.KafkaAuth),
		Registry: prometheus.NewRegistry(), Switches: configcenter.NewHolder(), cfg: cfg, log: cfg.Logger}
	a.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	a.switchesMetrics = configcenter.NewMetrics(a.Registry)
	gc, deps := a.grabDeps()
	if cfg.Hook != nil {
		cfg.Hook(&gc, &deps, a.Kafka)
	}
	a.Fence = deps.Fence
	a.relayBuckets(gc, deps)
	a.follow(ctx)
	if a.Service, err = grab.New(gc, deps); err != nil {
		_ = errors.Join(a.States.Close(), a.Kafka.Close(), db.Close(), pool.Close())
		return nil, err
	}
	a.Reconciler = grab.NewReconciler(a.Service)
	a.routes()
	return a, nil
}

// relayBuckets has the announcer hand a bucket's own sell-out or refill to bucket
// 0 of its promotion, on the shards and clock the service uses.
func (a *App) relayBuckets(gc grab.Config, d grab.Deps) {
	clock := d.Clock
	if clock == nil {
		clock = time.Now
	}
	serverOf := func(key string) redis.UniversalClient { return d.Shards[ring.Default.Shard(key)] }
	a.States.RelayBuckets(lua.BucketRelay(serverOf, gc.StateOutboxKey, clock))
}

// openPool connects the shards' clients and loads the scripts where it can.
func openPool(ctx context.Context, cfg Config) (*shardpool.Pool, error) {
	opts := redis.Options{PoolSize: 64, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}
	cfg.RedisAuth.Apply(&opts)
	pool, err := shardpool.New(cfg.RedisAddrs, opts)
	if err != nil {
		return nil, err
	}
	for _, c := range pool.Servers() {
		if err := lua.Load(ctx, c); err != nil {
			cfg.Logger.Error("scripts not loaded yet; they load on first use", "err", err.Error())
		}
	}
	return pool, nil
}

// grabDeps wires the grab service: the shards, the publisher (Kafka, or MySQL
// while kafkaDegrade is on), the record, the fence and the state announcer.
func (a *App) grabDeps() (grab.Config, grab.Deps) {
	shards := make([]redis.UniversalClient, 16)
	for i := range shards {
		shards[i] = a.Pool.Client(i)
	}
	gc, db, reg := a.cfg.Grab, a.Store, a.Registry
	a.States = promostate.New(a.cfg.KafkaBrokers, a.cfg.KafkaAuth, gc.StateOutboxKey, lua.StateDue, reg, a.log)
	return gc, grab.Deps{
		Shards: shards, Publisher: publish.NewRouter(a.Kafka, db.Flows, a.Switches, reg), Record: db.Flows, Switches: a.Switches,
		Metrics: grab.NewMetrics(reg), Logger: a.log,
		Fence: grab.NewFence(shards, db.Keys.PromotionKeys, reg, a.log),
		// The reconciler's list each second: what ended over a day ago is the sweep's.
		PromotionKeys: func(ctx context.Context) ([]string, error) {
			return db.Keys.PromotionKeysEndingAfter(ctx, time.Now().Add(-24*time.Hour))
		},
		States: a.States,
		EndedPromotionKeys: func(ctx context.Context) ([]string, error) {
			now := time.Now()
			return db.Keys.PromotionKeysEndedBetween(ctx, now.Add(-24*time.Hour), now)
		},
	}
}

// follow moves shards to the servers the sentinels elect and on-call names in
// the config center: the shard's client dials the new server, and the fence holds
// the shard until it has read the new server's markers.
func (a *App) follow(ctx context.Context) {
	moved := func([]int) {}
	if a.Fence != nil {
		a.Fence.FollowGenerations(a.Pool.Generation)
		moved = func(shards []int) { a.Fence.Moved(shards, a.Pool.Addr) }
	}
	opts := redis.Options{}
	a.cfg.RedisAuth.Apply(&opts)
	a.sentinels = shardpool.FollowSentinels(ctx, a.Pool, a.cfg.RedisSentinels, a.cfg.SentinelPrefix, opts, a.log, moved)
	a.Switches.AllowShardAddrs(shardpool.Allowlist(a.cfg.RedisAllow, a.cfg.RedisAddrs))
	a.Switches.FollowShards(a.Pool, a.log, moved)
}

// routes builds the public handler and the ops listener's.
func (a *App) routes() {
	mux := http.NewServeMux()
	grabtransport.Handler(mux, grabendpoint.New(a.Service, a.Switches, grabendpoint.NewAdmission(a.cfg.MaxInFlight, a.cfg.QueueWait, a.Registry)),
		a.cfg.Tokens, httpx.NewRouteMetrics(a.Registry, "grab"))
	required, advisory := readiness(a.Pool, a.Store.Ping, a.Kafka.Ping, a.Switches)
	probes := func(m *http.ServeMux) { httpx.Probes(m, a.Switches.Info, required, advisory) }
	httpx.PublicProbes(mux, required) // status only; the details are the ops listener's
	var fenced func() []grab.FencedShard
	if a.Fence != nil {
		fenced = a.Fence.Status
	}
	a.Handler = httpx.RouteFallback(mux)
	a.Ops = grabtransport.Readyz(fenced, httpx.OpsHandler(a.Registry, probes, a.cfg.Pprof))
}

// RunSentinels follows the masters the sentinels elect until ctx ends (without
// sentinels it only waits).
func (a *App) RunSentinels(ctx context.Context) error { return a.sentinels(ctx) }

// RunFence polls the shards' markers until ctx ends (grab/fence.go).
func (a *App) RunFence(ctx context.Context) error {
	if a.Fence == nil {
		<-ctx.Done()
		return nil
	}
	return a.Fence.Run(ctx, 200*time.Millisecond)
}

// RunReconciler runs the reconciler's passes every Config.ReconcileEvery until ctx ends.
func (a *App) RunReconciler(ctx context.Context) error {
	return a.Reconciler.RunReconciler(ctx, a.cfg.ReconcileEvery)
}

// FollowSwitches applies every valid switches document of Config.Switches until
// ctx ends. With no source it only waits for ctx.
func (a *App) FollowSwitches(ctx context.Context) error {
	if a.cfg.Switches == nil {
		<-ctx.Done()
		return nil
	}
	return configcenter.Follow(ctx, a.cfg.Switches, a.Switches, a.switchesMetrics, a.log)
}

// Close stops the service, then the Kafka publisher, the record and the shard
// clients; call it after the last request has finished.
func (a *App) Close() error {
	a.Service.Close()
	err := errors.Join(a.States.Close(), a.Kafka.Close(), a.Store.Close(), a.Pool.Close())
	if err != nil {
		return fmt.Errorf("grab-service: close: %w", err)
	}
	return nil
}
