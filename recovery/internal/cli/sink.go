package cli

import (
	"context"
	"flag"
	"log/slog"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/recovery/internal/flowlag"
	"github.com/flashsale/platform/recovery/internal/flowsink"
)

// Sink runs the flow sink service until SIGTERM/SIGINT.
func Sink(args []string) int {
	log := svc.Logger("flow-sink")
	var f svc.Flags
	fs := flag.NewFlagSet("recovery sink", flag.ExitOnError)
	f.Register(fs, "127.0.0.1:8082", "127.0.0.1:9182")
	cfg, healOn := registerSinkFlags(fs)
	nacos := configcenter.RegisterNacosFlags(fs)
	promo.IPv6PrefixFlag(fs) // --heal rebuilds the per-ip counters by it
	_ = fs.Parse(args)
	cfg.Brokers = f.Kafka
	auth, err := kafkaauth.FromEnv()
	if err != nil {
		return fail(log, "flow sink not started", err)
	}
	cfg.Auth = auth

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	db, err := openStore(ctx, f.MySQL, f.MySQLMigrate, cfg.Backoff, log)
	if err != nil {
		return fail(log, "flow sink not started", err)
	}
	defer db.Close()
	stop() // from here the run group handles signals

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	sink, err := flowsink.New(*cfg, db.Flows, flowsink.NewMetrics(reg), log)
	if err != nil {
		return fail(log, "flow sink not started", err)
	}
	defer sink.Close()
	meter := flowlag.NewMeter(cfg.Brokers, cfg.Auth, flow.Topic, cfg.Group)

	g := svc.NewGroup(log)
	serveProbes(g, f, reg, map[string]httpx.Check{
		"mysql": db.Ping,
		"kafka": func(ctx context.Context) error { return flowlag.Ping(ctx, cfg.Brokers) },
	}, log)
	g.Loop(sink.Run)
	g.Loop(func(ctx context.Context) error { return sink.RunLag(ctx, meter, 5*time.Second) })
	g.Loop(func(ctx context.Context) error { return sink.RunOwed(ctx, db.Flows, 10*time.Second, store.OwedKeep) })
	if *healOn {
		closePool, err := addHealer(g, f, nacos, db, meter, reg, log)
		if err != nil {
			return fail(log, "flow sink not started", err)
		}
		defer closePool()
	}
	if err := g.Run(); err != nil {
		return fail(log, "flow sink stopped", err)
	}
	return exitOK
}

// registerSinkFlags registers the sink's own flags: its config, and --heal.
func registerSinkFlags(fs *flag.FlagSet) (*flowsink.Config, *bool) {
	cfg := flowsink.Defaults()
	fs.StringVar(&cfg.Group, "group", cfg.Group, "Kafka consumer group id")
	fs.StringVar(&cfg.DeadLetterTopic, "dead-letter-topic", cfg.DeadLetterTopic, "topic receiving undecodable flow messages")
	fs.IntVar(&cfg.MaxBatch, "batch", cfg.MaxBatch, "most messages stored in one MySQL transaction")
	fs.DurationVar(&cfg.MaxWait, "batch-wait", cfg.MaxWait, "longest a batch waits for more messages after its first")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", cfg.WriteTimeout, "bound on one MySQL write attempt (a hung server becomes a retry)")
	fs.DurationVar(&cfg.Backoff.Max, "max-backoff", cfg.Backoff.Max, "longest wait between retries while MySQL or Kafka is down")
	fs.BoolVar(&cfg.SkipLost, "skip-lost", false, "go on past flow events Kafka deleted before the sink stored them (retention passed); "+
		"without it the sink stops at that partition and reports them (flashsale_sink_lost_events): see the RUNBOOK first")
	heal := fs.Bool("heal", false, "rebuild, with no one woken, any shard whose server is not whole (a replica the sentinels promoted, "+
		"a server back empty), one instance at a time; needs --redis (and --redis-sentinels to follow a failover)")
	return &cfg, heal
}

// addHealer adds the healer's loops to g (--heal), following the switches of the
// deploy's source; the returned func closes its shard pool.
func addHealer(g *svc.Group, f svc.Flags, nacos *configcenter.NacosFlags, db *store.Store, meter *flowlag.Meter,
	reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	src, err := nacos.Source(f.Switches, log)
	if err != nil {
		return nil, err
	}
	loops, closePool, err := healerLoops(context.Background(), f, src, db, meter, reg, log)
	if err != nil {
		return nil, err
	}
	for _, l := range loops {
		g.Loop(l)
	}
	return closePool, nil
}

// serveProbes serves the sink's probes: on its listener the status alone, on its
// ops listener the details and /metrics, each bounded by --max-conns.
func serveProbes(g *svc.Group, f svc.Flags, reg *prometheus.Registry, checks map[string]httpx.Check, log *slog.Logger) {
	mux := http.NewServeMux()
	httpx.PublicProbes(mux, checks)
	probes := func(mux *http.ServeMux) { httpx.Probes(mux, nil, checks, nil) }
	conns := svc.NewConnMetrics(reg)
	g.HTTP(svc.Server(f.Listen, httpx.RouteFallback(mux), log), conns.Limit("api", f.MaxConns))
	g.HTTP(svc.OpsServer(f.OpsListen, httpx.OpsHandler(reg, probes, false), log), conns.Limit("ops", f.MaxConns))
}

// openStore opens MySQL, waiting out an outage at start as the sink waits out one
// later: a sink started while MySQL is down, or before the migrate job brought the
// schema up, comes up when MySQL does.
func openStore(ctx context.Context, dsn string, migrate bool, b flowsink.Backoff, log *slog.Logger) (*store.Store, error) {
	for n := 0; ; n++ {
		octx, cancel := context.WithTimeout(ctx, 30*time.Second)
		db, err := store.OpenWith(octx, dsn, migrate)
		cancel()
		if err == nil {
			return db, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		wait := min(b.Min<<min(n, 10), b.Max)
		log.Warn("MySQL not reachable at start; retrying", "attempt", n+1, "retryIn", wait.String(), "err", err.Error())
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
}
