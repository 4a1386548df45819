// Command bench measures grab-service against baselines started in the same run on
// the same machine and prints every figure as a ratio (docs/benchmarks.md).
// `make bench` starts the local stack and runs it as `bin/bench --stack <file>`.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/stack"
)

type options struct {
	stackFile    string
	out          string
	conc         int
	dur          time.Duration
	levels       []int
	recoveryRows int
	recoveryBin  string
	hotShard     int
	peak         float64
	fullScaling  bool
	skip         map[string]bool
}

func main() {
	var o options
	var levels, skip string
	flag.StringVar(&o.stackFile, "stack", "", "stack file written by `make up` (default .run/stack.json)")
	flag.StringVar(&o.out, "out", "bench-results", "directory for latest.md, latest.html, latest.svg and figures.json (bin/plan --figures)")
	flag.IntVar(&o.conc, "concurrency", 64, "requests in flight for the hot, sold-out and traditional phases")
	flag.DurationVar(&o.dur, "duration", 2*time.Second, "length of one measured run (a warm-up precedes each)")
	flag.StringVar(&levels, "levels", "1,2,4,8,16,32,64,128,256,512", "concurrency levels of the spread table")
	flag.IntVar(&o.hotShard, "hot-shard", 0, "shard of the hot promotion (0..15)")
	flag.BoolVar(&randomRequestIDs, "random-request-ids", false, "send requestIds as they come, not derived beside their promotion (docs/CONTRACT.md)")
	flag.Float64Var(&o.peak, "peak", 0, "peak GRANTED/s for the latency scenario, instead of this run's hot and spread runs (to run it alone)")
	flag.IntVar(&o.recoveryRows, "recovery-rows", 1_000_000, "flow rows the recovery scenario rebuilds from")
	flag.StringVar(&o.recoveryBin, "recovery-bin", "", "the recovery binary (default bin/recovery beside bin/bench)")
	serveKind := flag.String("serve", "", "internal: serve one baseline (bare or lock) in this process")
	serveDSN := flag.String("serve-dsn", "", "internal: the lock baseline's database")
	serveConns := flag.Int("serve-conns", 64, "internal: the lock baseline's connection pool")
	flag.BoolVar(&o.fullScaling, "scaling", false, "the scaling phase's full grid: 1, 2, 4, 8, 16 promotions at concurrency 1, 4, 16 (default: 1 and 16 at 4 and 16)")
	flag.StringVar(&skip, "skip", "", "scenarios to leave out, comma-separated: hot,soldout,scaling,check,traditional,spread,buckets,latency,recovery")
	flag.Parse()
	if *serveKind != "" {
		if err := serveBaseline(*serveKind, *serveDSN, *serveConns); err != nil {
			fmt.Fprintln(os.Stderr, "bench --serve:", err)
			os.Exit(1)
		}
		return
	}
	var err error
	if o.hotShard < 0 || o.hotShard >= 16 {
		fmt.Fprintln(os.Stderr, "bench: --hot-shard: want 0..15")
		os.Exit(2)
	}
	if o.levels, err = parseInts(levels); err != nil {
		fmt.Fprintln(os.Stderr, "bench: --levels:", err)
		os.Exit(2)
	}
	o.skip = map[string]bool{}
	for _, s := range strings.Split(skip, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.skip[s] = true
		}
	}
	if o.recoveryBin == "" {
		if exe, err := os.Executable(); err == nil {
			o.recoveryBin = filepath.Join(filepath.Dir(exe), "recovery")
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(f), &n); err != nil || n < 1 || n > 4096 {
			return nil, fmt.Errorf("%q is not a concurrency in 1..4096", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// bench is one run: the stack, the promotions it made, and what it found.
type bench struct {
	options
	st       stack.File
	id       string // this run's token, in every promotion and request id
	hotPromo string // the hot promotion's id (hotID)
	token    string
	admin    *admin
	shards   []*redis.Client
	tally    *tally
	res      *results
	// hotMeasured is scenario 1's median run, scenario 3's "ours".
	hotMeasured measured
}

func run(ctx context.Context, o options) error {
	st, err := stack.Load(o.stackFile)
	if err != nil {
		return err
	}
	if err := loopbackOnly(st); err != nil {
		return err
	}
	if err := checkFences(ctx, st.Ops.Grab); err != nil {
		return err
	}
	b := &bench{options: o, st: st, id: runID(), token: env("FLASHSALE_CHECKOUT_TOKEN", "dev-checkout-token"),
		admin: newAdmin(st.Admin, env("FLASHSALE_ADMIN_TOKEN", "dev-admin-token")), tally: newTally(),
		res: &results{Started: time.Now().UTC(), LoadStart: loadAverage(), Conc: o.conc, Duration: o.dur, Command: command(),
			RandomRequestIDs: randomRequestIDs}}
	for _, addr := range st.Redis {
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: max(o.conc*2, 16)})
		defer c.Close()
		b.shards = append(b.shards, c)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, err := range b.admin.cleanup(cctx) {
			fmt.Fprintln(os.Stderr, "bench: cleanup:", err)
		}
	}()
	scratch, err := openScratch(ctx, st.MySQLDSN, "bench_"+b.id)
	if err != nil {
		return err
	}
	defer scratch.drop()
	b.res.Machine = readMachine(ctx, b.shards[0], scratch.DB)
	findHotRedis(ctx, b.shards[o.hotShard])
	fmt.Fprintf(os.Stderr, "bench %s on %s\n", b.id, b.res.Machine)

	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"hot", b.hot},
		{"soldout", b.soldOut},
		{"scaling", b.scaling}, // CPU per GRANTED by promotions and concurrency (scaling.go)
		{"check", b.check},     // the capacity model fed by hot, soldout and scaling, checked (check.go)
		{"traditional", func(ctx context.Context) error { return b.traditional(ctx, scratch) }},
		{"spread", b.spread},
		{"buckets", b.buckets},
		{"latency", b.latency},
		{"recovery", b.recovery},
	}
	for _, s := range steps {
		if o.skip[s.name] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "\n== %s\n", s.name)
		b.settle(20 * time.Second)
		t := time.Now()
		if err := s.fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Fprintf(os.Stderr, "   %s done in %s\n", s.name, time.Since(t).Round(100*time.Millisecond))
	}
	b.checkInvariants(ctx)
	b.res.Finished = time.Now().UTC()
	b.res.LoadEnd = loadAverage()
	if err := b.res.write(o.out); err != nil {
		return err
	}
	fmt.Println(b.res.markdown())
	fmt.Fprintf(os.Stderr, "written: %s\n", strings.Join(b.res.files(o.out), ", "))
	if !b.res.invariantsPass() {
		return fmt.Errorf("an invariant failed (see the table)")
	}
	return nil
}

func runID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "b" + hex.EncodeToString(b)
}

// command is how this run was started, for the report.
func command() string {
	line := strings.Join(append([]string{"bin/bench"}, os.Args[1:]...), " ")
	if os.Getenv("MAKELEVEL") == "" {
		return line
	}
	mk := "make bench"
	if a := os.Getenv("ARGS"); a != "" {
		mk += ` ARGS="` + a + `"`
	}
	return mk + " (runs " + line + ")"
}
