// Package app wires promo-admin from the inside out: the record, the shard pool,
// the service, its endpoints and the HTTP handler. main and the tests build the
// same thing through New.
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
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/promostate"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
	"github.com/flashsale/platform/promo-admin/internal/adminendpoint"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
	"github.com/flashsale/platform/promo-admin/internal/admintransport"
	"github.com/flashsale/platform/promo-admin/internal/console"
)

// Config is everything promo-admin is told; nothing is read from the environment here.
type Config struct {
	RedisAddrs []string // 16 entries, index = logical shard
	// RedisSentinels, when set, elect each shard's master (as SentinelPrefix plus
	// the shard); on-call's shardAddrs still win.
	RedisSentinels []string
	SentinelPrefix string
	// RedisAllow is the servers on-call's shardAddrs may name (shardpool.Allowlist).
	RedisAllow []string
	MySQLDSN   string
	// MySQLSkipMigrations connects to the record without applying the migrations
	// (store.Connect, svc.Flags.MySQLMigrate off); zero applies them (store.Open).
	MySQLSkipMigrations bool
	Tokens              httpx.Tokens
	Logger              *slog.Logger
	Service             adminservice.Config
	// Redis is the template of every shard client; zero means RedisDefaults().
	Redis *redis.Options
	// Switches is where the on-call switches document is read from (FollowSwitches);
	// nil follows none, and GET /v1/switches shows the defaults.
	Switches configcenter.Source
	// SwitchesStore is where on-call's PUT /v1/switches publishes the document (the
	// one Switches follows); nil answers every change 503, publishing nothing.
	SwitchesStore configcenter.Store
	// KafkaBrokers, when set, is where the sale state changes of stops, deletes and
	// patches are published (promo-state); unset, they wait in the shards'
	// outboxes for grab-service's reconciler.
	KafkaBrokers []string
	// KafkaAuth is SASL and TLS to the brokers (kafkaauth.FromEnv); zero: none.
	KafkaAuth kafkaauth.Auth
}

// RedisDefaults are the shard client settings promo-admin runs with. One retry is
// safe: every admin script is version-guarded, so a replay changes nothing.
func RedisDefaults() redis.Options {
	return redis.Options{
		DialTimeout:           time.Second,
		ReadTimeout:           2 * time.Second,
		WriteTimeout:          2 * time.Second,
		ContextTimeoutEnabled: true,
		MaxRetries:            1,
		PoolSize:              16,
	}
}

// App is a wired promo-admin.
type App struct {
	Admin    *adminservice.Admin
	Store    *store.Store
	Pool     *shardpool.Pool
	Registry *prometheus.Registry
	// Handler is the public API's, the console's and the probes'; Ops the ops listener's (/metrics, the probes).
	Handler, Ops http.Handler
	// Switches holds the switches document in force, as GET /v1/switches shows it.
	Switches *configcenter.Holder
	// States publishes sale state changes; nil without KafkaBrokers.
	States *promostate.Announcer
	// Desk is on-call's: changes of the switches and their history.
	Desk *adminservice.SwitchDesk

	switchesSrc     configcenter.Source
	switchesStore   configcenter.Store
	switchesMetrics *configcenter.Metrics
	log             *slog.Logger
	sentinels       func(context.Context) error // shardpool.FollowSentinels' loop
}

// New opens the record (migrating it), builds the shard pool and the handler.
// It does not wait for Redis: /readyz reports the shards that do not answer.
func New(ctx context.Context, cfg Config) (*App, error) {
	if len(cfg.Tokens) == 0 {
		return nil, errors.New("promo-admin: no tokens configured")
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	cfg.Service.Logger = logger
	opts := RedisDefaults()
	if cfg.Redis != nil {
		opts = *cfg.Redis
	}
	pool, err := shardpool.New(cfg.RedisAddrs, opts)
	if err != nil {
		return nil, err
	}
	st, err := store.OpenWith(ctx, cfg.MySQLDSN, !cfg.MySQLSkipMigrations)
	if err != nil {
		pool.Close()
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var states *promostate.Announcer
	if len(cfg.KafkaBrokers) > 0 {
		states = promostate.New(cfg.KafkaBrokers, cfg.KafkaAuth, promo.StateOutboxKey, lua.StateDue, reg, logger)
		serverOf := func(key string) redis.UniversalClient { return pool.Client(ring.Default.Shard(key)) }
		states.RelayBuckets(lua.BucketRelay(serverOf, promo.StateOutboxKey, time.Now))
		cfg.Service.Announce = states.Announce
	}
	admin := adminservice.New(st.Promotions, pool, cfg.Service)
	switches := configcenter.NewHolder()
	desk := adminservice.NewSwitchDesk(cfg.SwitchesStore, switches.Check, store.NewSwitchHistory(st.DB()), cfg.Service)
	approvals := adminservice.NewApprovals(admin, store.NewProposals(st.DB()), cfg.Service)
	set := adminendpoint.New(admin, desk, approvals, logger)
	// On-call moves a shard to its promoted replica through the config center. The
	// admin scripts refuse FENCED while a rebuild works on the new server.
	switches.AllowShardAddrs(shardpool.Allowlist(cfg.RedisAllow, cfg.RedisAddrs))
	switches.FollowShards(pool, logger, nil)
	sentinels := shardpool.FollowSentinels(ctx, pool, cfg.RedisSentinels, cfg.SentinelPrefix, opts, logger, nil)
	checks := map[string]httpx.Check{"mysql": st.Ping, "redis": pool.Ping}
	handler := admintransport.NewHTTPHandler(set, admintransport.Options{
		Tokens:         cfg.Tokens,
		Metrics:        httpx.NewRouteMetrics(reg, "promo_admin"),
		Checks:         checks,
		Switches:       switches,
		SwitchesSource: describeSource(cfg.Switches),
		Console:        console.Handler(),
	})
	return &App{Admin: admin, Store: st, Pool: pool, Registry: reg, Handler: handler, Ops: admintransport.OpsHandler(reg, checks), States: states,
		Switches: switches, Desk: desk, switchesStore: cfg.SwitchesStore, switchesSrc: cfg.Switches, switchesMetrics: configcenter.NewMetrics(reg), log: logger, sentinels: sentinels}, nil
}

// RunSentinels follows the masters the sentinels elect until ctx ends (without
// sentinels it only waits).
func (a *App) RunSentinels(ctx context.Context) error { return a.sentinels(ctx) }

// FollowSwitches applies every valid switches document of Config.Switches until
// ctx ends (a malformed one is rejected whole; the last good one stays). With no
// source it only waits for ctx.
func (a *App) FollowSwitches(ctx context.Context) error {
	if a.switchesSrc == nil {
		<-ctx.Done()
		return nil
	}
	return configcenter.Follow(ctx, a.switchesSrc, a.Switches, a.switchesMetrics, a.log)
}

// RecordSwitches records every version of the switches this instance puts in
// force in the switch history until ctx ends (adminservice.SwitchDesk.RunRecorder):
// a version no change through the API names is recorded as made outside it.
func (a *App) RecordSwitches(ctx context.Context) error {
	if a.switchesSrc == nil {
		<-ctx.Done()
		return nil
	}
	return a.Desk.RunRecorder(ctx, a.Switches, describeSource(a.switchesSrc), 3*time.Second)
}

// describeSource names a switches source for GET /v1/switches.
func describeSource(src configcenter.Source) string {
	switch s := src.(type) {
	case nil:
		return ""
	case configcenter.FileSource:
		return "file:" + s.Path
	case interface{ Describe() string }:
		return s.Describe()
	}
	return fmt.Sprintf("%T", src)
}

// Close releases the state publisher, the record and the shard clients.
func (a *App) Close() error {
	var err error
	if a.States != nil {
		err = a.States.Close()
	}
	if a.switchesStore != nil {
		err = errors.Join(err, a.switchesStore.Close())
	}
	err = errors.Join(err, a.Store.Close(), a.Pool.Close())
	if err != nil {
		return fmt.Errorf("promo-admin: close: %w", err)
	}
	return nil
}
