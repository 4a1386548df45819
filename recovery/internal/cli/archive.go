package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/recovery/internal/progress"
)

// Archive keeps the record in bounds: it marks archived the promotions whose sale
// ended more than --older-than ago, moves their flow rows to grab_flow_archive a
// batch at a time (progress on stderr), and purges the holds settled before then.
// Safe to stop and run again: each batch is a transaction, and a run finishes what
// the last one left. Exit 0 when done, 1 when a step failed.
func Archive(args []string) int {
	log := svc.Logger("recovery")
	fs := flag.NewFlagSet("recovery archive", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: recovery archive [flags]

Moves the flow rows of the promotions whose sale ended more than --older-than ago
from grab_flow to grab_flow_archive, and deletes the holds settled before then. An
archived promotion is history: rebuild and verify no longer restore or compare it.
The DSN comes from $`+svc.MySQLEnv+` (or the file $`+svc.MySQLEnv+`_FILE names), else --mysql, else the local stack's.

`)
		fs.PrintDefaults()
	}
	dsn := fs.String("mysql", "", "MySQL DSN (default: $"+svc.MySQLEnv+", else the local stack's)")
	stackFile := fs.String("stack", "", "local stack file to take the DSN from when neither --mysql nor $"+svc.MySQLEnv+" is set")
	olderThan := fs.Duration("older-than", 30*24*time.Hour, "archive promotions whose sale ended at least this long ago (30 days: the request index's life)")
	batch := fs.Int("batch", 2000, "flow rows moved (and holds deleted) per transaction")
	quiet := fs.Bool("quiet", false, "no progress bar")
	_ = fs.Parse(args)
	if fs.NArg() > 0 || *batch < 1 || *olderThan < 24*time.Hour {
		fmt.Fprintln(fs.Output(), "recovery archive: --batch must be at least 1 and --older-than at least 24h")
		fs.Usage()
		return exitUsage
	}
	target, err := migrateDSN(*dsn, *stackFile)
	if err != nil {
		return fail(log, "archive not started", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	db, err := store.Connect(ctx, target)
	if err != nil {
		return fail(log, "archive not started", err)
	}
	defer db.Close()
	var bar io.Writer
	if !*quiet {
		bar = os.Stderr
	}
	sum, err := archive(ctx, db.Archive, time.Now().Add(-*olderThan), *batch, bar, log)
	fmt.Printf("archive: %d promotions marked, %d flow rows moved, %d holds purged\n", sum.marked, sum.rows, sum.holds)
	if err != nil {
		return fail(log, "archive stopped; run it again to finish", err)
	}
	return exitOK
}

type archived struct{ marked, rows, holds int64 }

// archive runs the three steps: mark, move each promotion's rows, purge holds. The
// bar shows progress on a terminal; the log, a line per promotion, in a Job's log.
func archive(ctx context.Context, a *store.Archive, cutoff time.Time, batch int, bar io.Writer, log *slog.Logger) (archived, error) {
	var sum archived
	var err error
	if sum.marked, err = a.MarkEnded(ctx, cutoff); err != nil {
		return sum, err
	}
	left, err := a.ArchivedRows(ctx)
	if err != nil {
		return sum, err
	}
	var total int64
	for _, n := range left {
		total += n
	}
	log.Info("archive: rows to move", "cutoff", cutoff.UTC().Format(time.RFC3339), "marked", sum.marked, "promotions", len(left), "rows", total)
	p := progress.New(bar, int(total), "archive", "rows")
	for id := range left {
		for {
			n, err := a.MoveFlows(ctx, id, batch)
			if err != nil {
				return sum, err
			}
			if n == 0 {
				log.Info("archive: promotion moved", "promotion", id.String(), "rowsDone", sum.rows, "rowsTotal", total)
				break
			}
			sum.rows += int64(n)
			if p != nil {
				_ = p.Add64(int64(n))
			}
		}
	}
	for {
		n, err := a.PurgeHolds(ctx, cutoff, batch)
		if err != nil {
			return sum, err
		}
		sum.holds += n
		if n < int64(batch) {
			return sum, nil
		}
	}
}
