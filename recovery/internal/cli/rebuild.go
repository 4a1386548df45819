package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/recovery/internal/heal"
	"github.com/flashsale/platform/recovery/internal/rebuild"
)

// Rebuild restores shards from MySQL: --shard N | --all | --missing | --promo <promoId>_<type>.
func Rebuild(args []string) int {
	// A one-shot batch job that allocates per flow row and keeps little: fewer
	// collections trade some memory for a quarter less CPU on a big shard.
	debug.SetGCPercent(400)
	log := svc.Logger("recovery")
	cmd := rebuildCmd{o: rebuild.Defaults()}
	fs := cmd.flags()
	_ = fs.Parse(args)
	if code, ok := cmd.check(fs); !ok {
		return code
	}
	if err := cmd.c.resolve(fs, log); err != nil {
		return fail(log, "rebuild not started", err)
	}
	if !cmd.quiet {
		cmd.o.Progress = os.Stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return cmd.run(ctx, log)
}

// rebuildCmd is a rebuild's command line.
type rebuildCmd struct {
	c                   conn
	o                   rebuild.Options
	shards              shardList
	all, missing, quiet bool
	promoRef            string
}

func (cmd *rebuildCmd) flags() *flag.FlagSet {
	fs := flag.NewFlagSet("recovery rebuild", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: recovery rebuild --shard N[,M] | --all | --missing | --promo <promoId>_<type> [flags]

Restores, from the promotion table and the flow log, every live promotion's hash
(remaining = total - GRAB + CANCEL), per-pin and per-ip counters and request ledger.
The shards are fenced meanwhile (grab-service answers UNAVAILABLE for them), and the
rebuild waits for open takes to settle and for the flow sink to store what Kafka
holds, refusing unless --force. It exits 0 only once every live grab-service
instance serves the rebuilt shards again.

`)
		fs.PrintDefaults()
	}
	cmd.c.register(fs)
	o := &cmd.o
	fs.Var(&cmd.shards, "shard", "logical shard(s) to rebuild whole: N or N,M (repeatable)")
	fs.BoolVar(&cmd.all, "all", false, "rebuild all 16 shards")
	fs.BoolVar(&cmd.o.IgnoreDeadLetters, "ignore-dead-letters", false, "rebuild promotions whose flow events are in the dead-letter topic, not replayed (refused otherwise: deploy/RUNBOOK.md, \"Alert: FlowSinkDeadLetters\")")
	fs.BoolVar(&cmd.missing, "missing", false, "rebuild the shards whose server is not whole: no built marker (lost and not rebuilt since), or the marker of another server (a replica promoted in a failover)")
	fs.StringVar(&cmd.promoRef, "promo", "", "rebuild one promotion, <promoId>_<type>")
	fs.BoolVar(&o.Force, "force", false, "rebuild even if open takes do not settle or the flow sink's catch-up cannot be confirmed")
	fs.DurationVar(&o.Drain, "drain-timeout", o.Drain, "how long to wait for open takes of the shards (pending sets) to be settled by grab-service")
	fs.DurationVar(&o.CatchUp, "catchup-timeout", o.CatchUp, "how long to wait for the flow sink to store what Kafka holds")
	fs.DurationVar(&o.Settle, "settle", o.Settle, "wait after fencing, so grab-service sees the fence and grabs in flight finish")
	fs.DurationVar(&o.FenceTTL, "fence-ttl", o.FenceTTL, "how long a fence outlives a killed rebuild")
	fs.DurationVar(&o.AdminGrace, "admin-grace", o.AdminGrace, "how long after it was recorded an admin change may still be promoted by its promo-admin request: promo-admin's --repair-grace (15s) plus clock skew; raise it with that flag. Younger changes of the shards are waited for")
	fs.IntVar(&o.Batch, "batch", o.Batch, "most Redis commands per pipeline")
	fs.DurationVar(&o.ServeTimeout, "serve-timeout", o.ServeTimeout, "how long, after the fences are lifted, to wait for every live grab-service instance to serve the shards again (the exit waits for it)")
	fs.BoolVar(&cmd.quiet, "quiet", false, "no progress bar")
	return fs
}

// check accepts exactly one of the modes, and a well-formed --promo; otherwise it
// gives the exit code.
func (cmd *rebuildCmd) check(fs *flag.FlagSet) (int, bool) {
	modes := 0
	for _, set := range []bool{len(cmd.shards) > 0, cmd.all, cmd.missing, cmd.promoRef != ""} {
		if set {
			modes++
		}
	}
	if modes != 1 || fs.NArg() > 0 {
		fs.Usage()
		return exitUsage, false
	}
	if cmd.promoRef != "" {
		id, typ, ok := promo.SplitPromotionRef(cmd.promoRef)
		if !ok || !promo.ValidPromoID(id) || !promo.ValidType(typ) {
			fmt.Fprintf(os.Stderr, "recovery rebuild: --promo %q: want <promoId>_<type>, e.g. sale-42_1\n", cmd.promoRef)
			return exitUsage, false
		}
		cmd.o.Promo = &store.ID{PromoID: id, Type: typ}
	}
	return exitOK, true
}

// run connects, names the shards of --all or --missing, rebuilds and reports.
func (cmd *rebuildCmd) run(ctx context.Context, log *slog.Logger) int {
	pool, clients, db, lag, err := cmd.c.open(ctx)
	if err != nil {
		return fail(log, "rebuild not started", err)
	}
	defer pool.Close()
	defer db.Close()
	// One rebuild at a time, this one or the healer's (recovery/internal/heal).
	release, ok, err := heal.Acquire(ctx, db.DB().DB, 5*time.Minute)
	if !ok {
		if err == nil {
			err = fmt.Errorf("the rebuild lock %s stayed held for 5 minutes", heal.LockName)
		}
		return fail(log, "rebuild not started: another rebuild (the healer's?) holds the lock", err)
	}
	defer release()
	shards := cmd.shards
	switch {
	case cmd.all:
		for s := range clients {
			shards = append(shards, s)
		}
	case cmd.missing:
		if shards, err = rebuild.Unbuilt(ctx, clients); err != nil {
			return fail(log, "rebuild not started", err)
		}
		if len(shards) == 0 {
			fmt.Println("rebuild: every shard holds its built marker; nothing to rebuild")
			return exitOK
		}
	}
	cmd.o.Shards = shards
	sum, err := rebuild.Run(ctx, rebuild.Deps{Shards: clients, Record: db.Rebuild, Flows: db.Flows, Lag: lag, Log: log}, cmd.o)
	if len(sum.Shards) > 0 {
		sum.Print(os.Stdout)
	}
	if err != nil {
		if errors.Is(err, rebuild.ErrRefused) || errors.Is(err, rebuild.ErrNotServed) {
			fmt.Fprintf(os.Stderr, "recovery rebuild: %v\n", err)
			return exitFail
		}
		return fail(log, "rebuild failed", err)
	}
	return exitOK
}
