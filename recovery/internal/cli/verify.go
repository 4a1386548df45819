package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/recovery/internal/verify"
)

// Verify compares Redis with MySQL; exit 0 clean, 1 drift, 2 usage or unable to check.
func Verify(args []string) int {
	log := svc.Logger("recovery")
	var c conn
	var shards shardList
	fs := flag.NewFlagSet("recovery verify", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: recovery verify [--shard N[,M]] [-v] [flags]

Compares every live promotion's Redis counters (remaining, every pin and ip) with the
flow log in MySQL. Prints each drift and exits 1 if any; prints one summary line and
exits 0 when clean. Promotions with takes still open are reported "in flight".
With --index it also checks that every request index entry the record's GRAB rows
say a shard holds is there.

`)
		fs.PrintDefaults()
	}
	c.register(fs)
	o := verify.Defaults()
	fs.Var(&shards, "shard", "only these logical shards: N or N,M (repeatable)")
	fs.DurationVar(&o.CatchUp, "catchup-timeout", o.CatchUp, "how long to wait for the flow sink before comparing")
	fs.IntVar(&o.Rechecks, "rechecks", o.Rechecks, "times a differing promotion is read again before it is reported")
	fs.DurationVar(&o.RecheckDelay, "recheck-delay", o.RecheckDelay, "wait before each recheck")
	fs.BoolVar(&o.Index, "index", o.Index, "also check every shard's request index against the record's GRAB rows of the last 30 days")
	verbose := fs.Bool("v", false, "also print a line per promotion checked")
	quiet := fs.Bool("quiet", false, "no progress bar")
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	o.Shards = shards
	if !*quiet {
		o.Progress = os.Stderr
	}
	if err := c.resolve(fs, log); err != nil {
		fail(log, "verify not started", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pool, clients, db, lag, err := c.open(ctx)
	if err != nil {
		fail(log, "verify not started", err)
		return exitUsage
	}
	defer pool.Close()
	defer db.Close()
	rep, err := verify.Run(ctx, verify.Deps{Shards: clients, Record: db.Rebuild, Lag: lag, Log: log}, o)
	if err != nil {
		fail(log, "verify could not check", err)
		return exitUsage
	}
	rep.Print(os.Stdout, *verbose)
	if len(rep.Drifts()) > 0 {
		return exitFail
	}
	return exitOK
}
