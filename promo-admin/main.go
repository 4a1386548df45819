// Command promo-admin serves merchandisers: it creates, changes, stops and deletes
// promotions, keeping each one's MySQL row and Redis hash in agreement. It only
// wires the packages under internal/ (see internal/app).
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
	"github.com/flashsale/platform/promo-admin/internal/admintransport"
	"github.com/flashsale/platform/promo-admin/internal/app"
)

func main() {
	logger := svc.Logger("promo-admin")
	if err := run(logger, os.Args[1:]); err != nil {
		logger.Error("promo-admin stopped", "err", err.Error())
		os.Exit(1)
	}
}

func run(logger *slog.Logger, args []string) error {
	var f svc.Flags
	fs := flag.NewFlagSet("promo-admin", flag.ContinueOnError)
	f.Register(fs, "127.0.0.1:8081", "127.0.0.1:9181") // --kafka: where stops, deletes and patches announce their state changes
	nacos := configcenter.RegisterNacosFlags(fs)
	var sc adminservice.Config
	fs.DurationVar(&sc.RedisTimeout, "redis-timeout", 2*time.Second, "bound on each Redis call")
	fs.DurationVar(&sc.RepairGrace, "repair-grace", 15*time.Second, "age after which a pending change no longer belongs to its request and the repairer resolves it")
	fs.DurationVar(&sc.RepairEvery, "repair-every", 3*time.Second, "period of the repairer")
	fs.BoolVar(&sc.RequireApproval, "require-approval", envBool("FLASHSALE_REQUIRE_APPROVAL"),
		"creates and patches of total, limits, window or channels wait for an approver (env FLASHSALE_REQUIRE_APPROVAL=1)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}

	tokens, err := svc.Tokens(f.Local, tokenSpecs(sc.RequireApproval || f.Local)...)
	if err != nil {
		return err
	}
	redisAuth, kafkaAuth, err := kafkaauth.BackendsFromEnv()
	if err != nil {
		return err
	}
	redisOpts := app.RedisDefaults()
	redisAuth.Apply(&redisOpts)
	switches, err := nacos.Source(f.Switches, logger)
	if err != nil {
		return err
	}
	// Where on-call's PUT /v1/switches publishes: the document switches follows.
	switchesStore, err := nacos.Store(f.Switches, logger)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := app.New(ctx, app.Config{
		RedisAddrs: f.Redis, RedisSentinels: f.RedisSentinels, SentinelPrefix: f.RedisSentinelPrefix, RedisAllow: f.RedisAllow, Redis: &redisOpts, MySQLDSN: f.MySQL, MySQLSkipMigrations: !f.MySQLMigrate, Tokens: tokens, Logger: logger, Service: sc, KafkaBrokers: f.Kafka, KafkaAuth: kafkaAuth,
		// Shown read-only at GET /v1/switches; its shardAddrs say where each shard's server is.
		Switches: switches, SwitchesStore: switchesStore,
	})
	if err != nil {
		return err
	}
	defer a.Close()

	return serve(a, f, logger)
}

// tokenSpecs are the roles promo-admin knows; the approver's only where there are
// proposals to decide, so a deployment without approval starts as before.
func tokenSpecs(approvers bool) []svc.TokenSpec {
	specs := []svc.TokenSpec{
		{Env: "FLASHSALE_ADMIN_TOKEN", LocalDefault: "dev-admin-token", Role: httpx.RoleMerchandiser},
		{Env: "FLASHSALE_VIEWER_TOKEN", LocalDefault: "dev-viewer-token", Role: httpx.RoleViewer},
		// On-call's: the one role that changes the switches (PUT /v1/switches).
		{Env: "FLASHSALE_ONCALL_TOKEN", LocalDefault: "dev-oncall-token", Role: admintransport.RoleOnCall},
	}
	if approvers {
		specs = append(specs, svc.TokenSpec{Env: "FLASHSALE_APPROVER_TOKEN", LocalDefault: "dev-approver-token", Role: httpx.RoleApprover})
	}
	return specs
}

// serve runs the listeners and the loops until one ends.
func serve(a *app.App, f svc.Flags, logger *slog.Logger) error {
	g := svc.NewGroup(logger)
	conns := svc.NewConnMetrics(a.Registry)
	g.HTTP(svc.Server(f.Listen, a.Handler, logger), conns.Limit("api", f.MaxConns))
	g.HTTP(svc.OpsServer(f.OpsListen, a.Ops, logger), conns.Limit("ops", f.MaxConns))
	g.Loop(a.Admin.RunRepairer) // at once, then every --repair-every
	g.Loop(a.FollowSwitches)
	g.Loop(a.RecordSwitches) // every version in force in the switch history, those made outside the API included
	g.Loop(a.RunSentinels)   // follows the masters Redis Sentinel elects, when it runs
	return g.Run()
}

// envBool reads a switch from the environment: "1" or "true" (any case) is on.
func envBool(name string) bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv(name)))
	return v == "1" || v == "true"
}
