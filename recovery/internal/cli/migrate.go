package cli

import (
	"context"
	"flag"
	"fmt"
	"os/signal"
	"syscall"
	"time"

	"github.com/flashsale/platform/internal/stack"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/svc"
)

// Migrate creates the record's database if it is missing and applies the schema
// migrations this binary embeds, printing each step: the migrate job, run as the
// migrator user before the services (which connect with --mysql-migrate=false)
// start or roll. Exit 0 when the schema is current, 1 when a step failed.
func Migrate(args []string) int {
	log := svc.Logger("recovery")
	fs := flag.NewFlagSet("recovery migrate", flag.ExitOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: recovery migrate [flags]

Creates the database the MySQL DSN names if it is missing and applies, in order, the
schema migrations not yet applied (one migrator at a time: a second one waits, then
finds nothing to do). Run it as the migrator user (flashsale_migrate) before the
services start or roll; they refuse a schema behind them. The DSN comes from
$`+svc.MySQLEnv+` (or the file $`+svc.MySQLEnv+`_FILE names), else --mysql, else the local stack's.

`)
		fs.PrintDefaults()
	}
	dsn := fs.String("mysql", "", "MySQL DSN (default: $"+svc.MySQLEnv+", else the local stack's; a DSN with a password belongs in the environment, not argv)")
	stackFile := fs.String("stack", "", "local stack file to take the DSN from when neither --mysql nor $"+svc.MySQLEnv+" is set")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long (a migration waits for the migrate lock, then runs its DDL)")
	_ = fs.Parse(args)
	if fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	target, err := migrateDSN(*dsn, *stackFile)
	if err != nil {
		return fail(log, "migrate not started", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	start := time.Now()
	err = store.Migrate(ctx, target, func(step string) {
		fmt.Printf("migrate: %s\n", step)
	})
	if err != nil {
		return fail(log, "migrate failed", err)
	}
	fmt.Printf("migrate: done in %s\n", time.Since(start).Round(time.Millisecond))
	return exitOK
}

// migrateDSN is --mysql, else the environment's DSN, else the local stack's, else
// svc's default (the local stack's standard port).
func migrateDSN(flagDSN, stackFile string) (string, error) {
	if flagDSN != "" {
		return flagDSN, nil
	}
	env, err := svc.Secret(svc.MySQLEnv)
	if err != nil || env != "" {
		return env, err
	}
	if st, err := stack.Load(stackFile); err == nil && st.MySQLDSN != "" {
		return st.MySQLDSN, nil
	} else if err != nil && stackFile != "" {
		return "", err
	}
	var f svc.Flags
	f.Register(flag.NewFlagSet("defaults", flag.ContinueOnError), "", "")
	return f.MySQL, nil
}
