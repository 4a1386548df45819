// Command drill runs the platform's fault drills against the local stack (`make
// drill`; `--short` in `make test`): under a steady grab load over many promotions on
// all 16 shards it stops Kafka, SIGKILLs grab-service, loses a Redis shard and
// rebuilds it, stops MariaDB, flips the on-call switches, fails over between two
// grab-service instances and storms the API with hostile input, and after each
// drill checks docs/CONTRACT.md's invariants across the whole stack (tools/checker): no
// oversell, limits hold, nothing leaks or is lost, the record agrees with Redis, bad
// input changes nothing. It prints one table; it exits 1 if any count is not 0.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/client"
	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/stack"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/tools/checker"
)

type options struct {
	stackFile, root string
	short           bool
	only            string
	rate            float64
	workers         int
	satWorkers      int
	hold            time.Duration // load before and after each fault
	settle          time.Duration
	kafkaDown       time.Duration
	mysqlDown       time.Duration
	hang            time.Duration
	degradePhase    bool
	crashes         int
	redisShard      int
	mysqlStop       string
	mysqlStart      string
	verbose         bool
}

func main() {
	var o options
	flag.StringVar(&o.stackFile, "stack", "", "stack file written by make up (default <repository>/.run/stack.json)")
	flag.StringVar(&o.root, "root", "", "repository root (default: two levels above the stack file)")
	flag.BoolVar(&o.short, "short", false, "the short suite of make test: fewer drills and shorter faults, a minute or two")
	flag.StringVar(&o.only, "drills", "", "comma-separated drills to run (default: all; with --short, the short suite): "+strings.Join(drillNames(), ","))
	flag.Float64Var(&o.rate, "rate", 200, "grab load, requests per second")
	flag.IntVar(&o.workers, "workers", 48, "concurrent buyers of the load")
	flag.IntVar(&o.satWorkers, "saturate-workers", 128, "concurrent buyers of the saturation drills (kafka-sat, crash-sat), each grabbing again as soon as it is answered")
	flag.DurationVar(&o.hold, "hold", 4*time.Second, "load before and after each fault (--short: 2s)")
	flag.DurationVar(&o.settle, "settle", 90*time.Second, "longest wait for open takes to settle and the flow sink to catch up before a check")
	flag.DurationVar(&o.kafkaDown, "kafka-down", 10*time.Second, "how long Kafka stays stopped (--short: 5s)")
	flag.DurationVar(&o.hang, "hang", 5*time.Second, "how long the Kafka broker and the Redis shard are frozen (SIGSTOP) before they are killed; 0 skips it (--short: 0)")
	flag.BoolVar(&o.degradePhase, "kafka-degrade", true, "the Kafka drill also kills the broker with kafkaDegrade switched on, selling through MySQL (--short: false)")
	flag.DurationVar(&o.mysqlDown, "mysql-down", 30*time.Second, "how long MariaDB stays stopped")
	flag.IntVar(&o.crashes, "crashes", 10, "grab-service SIGKILLs in the crash drill (--short: 3)")
	flag.IntVar(&o.redisShard, "redis-shard", 5, "the logical shard the Redis drill loses")
	// The environment can set them too, since make drill ARGS=... splits on spaces.
	flag.StringVar(&o.mysqlStop, "mysql-stop", os.Getenv("FLASHSALE_DRILL_MYSQL_STOP"), "shell command that stops MariaDB/MySQL (the MariaDB drill); env FLASHSALE_DRILL_MYSQL_STOP (default: systemctl under systemd, else start-stop-daemon on the server's own pid file)")
	flag.StringVar(&o.mysqlStart, "mysql-start", os.Getenv("FLASHSALE_DRILL_MYSQL_START"), "shell command that starts MariaDB/MySQL again; env FLASHSALE_DRILL_MYSQL_START")
	flag.BoolVar(&o.verbose, "v", false, "print every finding, not only the first ones")
	flag.Parse()
	if o.short {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		shortDefault := func(name string, apply func()) {
			if !set[name] {
				apply()
			}
		}
		shortDefault("hold", func() { o.hold = 2 * time.Second })
		shortDefault("kafka-down", func() { o.kafkaDown = 5 * time.Second })
		shortDefault("hang", func() { o.hang = 0 })
		shortDefault("kafka-degrade", func() { o.degradePhase = false })
		shortDefault("crashes", func() { o.crashes = 3 })
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "drill:", err)
		os.Exit(1)
	}
}

// defaultMySQLCommands stop and start the MariaDB server the stack uses: systemd
// where it runs, else start-stop-daemon as deploy/local/deps.sh starts it. They name
// the server by its own pid file (asked of the server: SELECT @@pid_file), never by
// program name alone, which would stop every mariadbd of the machine (tests start
// private ones) and would take any of them for the one to start.
func defaultMySQLCommands(pidFile string) (stop, start string) {
	if fi, err := os.Stat("/run/systemd/system"); err == nil && fi.IsDir() {
		if _, err := os.Stat("/usr/bin/systemctl"); err == nil {
			return "systemctl stop mariadb", "systemctl start mariadb"
		}
	}
	daemon := "/usr/sbin/mariadbd"
	if _, err := os.Stat(daemon); err != nil {
		daemon = "/usr/sbin/mysqld"
	}
	if pidFile == "" {
		pidFile = "/run/mysqld/mysqld.pid"
	}
	stop = fmt.Sprintf("start-stop-daemon --stop --oknodo --retry TERM/60/KILL/5 --pidfile %s --exec %s", pidFile, daemon)
	start = fmt.Sprintf("install -d -o mysql -g mysql %s && start-stop-daemon --start --oknodo --background --pidfile %s --exec %s -- --user=mysql --log-error=/var/log/mysql/error.log",
		filepath.Dir(pidFile), pidFile, daemon)
	if os.Geteuid() != 0 {
		stop, start = "sudo "+stop, "sudo sh -c '"+start+"'"
	}
	return stop, start
}

func run(o options) error {
	if o.stackFile == "" {
		root, err := stack.Root()
		if err != nil {
			return err
		}
		o.stackFile = filepath.Join(root, ".run", "stack.json")
	}
	if o.root == "" {
		o.root = filepath.Dir(filepath.Dir(o.stackFile))
	}
	drills, err := selectDrills(o)
	if err != nil {
		return err
	}
	// The MySQL driver logs dropped connections on its own; the MariaDB drill drops them all.
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	logPath := filepath.Join(o.root, ".run", "logs", "drill.log")
	logf, logw, err := openLog(logPath, o.verbose)
	if err != nil {
		return err
	}
	defer logf.Close()
	ctl, err := newStackCtl(o.stackFile, o.root, logw)
	if err != nil {
		return err
	}
	d, err := newDrillEnv(ctx, o, ctl, logw)
	if err != nil {
		return err
	}
	defer d.close()
	fmt.Fprintf(os.Stderr, "drill: %d drills against %s under %.0f grabs/s (log %s)\n", len(drills), ctl.st.Grab, o.rate, logPath)

	var rows []row
	failed := false
	for _, dr := range drills {
		if ctx.Err() != nil {
			break
		}
		r := d.runDrill(ctx, dr)
		rows = append(rows, r)
		failed = failed || r.failed()
		fmt.Fprintf(os.Stderr, "drill: %-9s %s\n", dr.name, r.verdict())
	}
	printTable(os.Stdout, rows, o)
	printFindings(os.Stdout, rows, o.verbose, logPath)
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	if failed {
		return errors.New("a drill failed: every count must be 0")
	}
	return nil
}

// drillEnv is what every drill shares: the stack, the load, the proxy in front of
// grab-service, and the checker's sources.
type drillEnv struct {
	o                       options
	ctl                     *stackCtl
	log                     io.Writer
	run                     string
	checkout, admin, viewer string
	adm                     *client.Admin // promo-admin, with the admin token
	proxy                   *proxy
	load                    *load
	shards                  []redis.UniversalClient // the pool's clients, by logical shard
	pool                    *shardpool.Pool
	stopFollow              context.CancelFunc
	db                      *store.Store
	src                     checker.Sources
	rounds                  []*round
	extra                   *instance
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func newDrillEnv(ctx context.Context, o options, ctl *stackCtl, log io.Writer) (*drillEnv, error) {
	if err := ctl.up(ctx); err != nil {
		return nil, err
	}
	d := &drillEnv{o: o, ctl: ctl, log: log, run: "dr" + time.Now().UTC().Format("150405"),
		checkout: env("FLASHSALE_CHECKOUT_TOKEN", "dev-checkout-token"),
		admin:    env("FLASHSALE_ADMIN_TOKEN", "dev-admin-token"),
		viewer:   env("FLASHSALE_VIEWER_TOKEN", "dev-viewer-token")}
	adm, err := newAdmin(ctl.st.Admin, d.admin)
	if err != nil {
		return nil, err
	}
	d.adm = adm
	if err := d.rebuildLost(ctx); err != nil {
		return nil, err
	}
	p, err := newProxy(ctl.st.Grab)
	if err != nil {
		return nil, err
	}
	d.proxy = p
	p.logf = d.logf
	if d.load, err = newLoad(p.URL(), d.checkout, d.run, max(o.workers, o.satWorkers)); err != nil {
		d.close()
		return nil, err
	}
	if err := d.openShards(ctx); err != nil {
		d.close()
		return nil, err
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	db, err := store.Open(octx, ctl.st.MySQLDSN)
	if err != nil {
		d.close()
		return nil, err
	}
	d.db = db
	d.src = checker.Sources{Shards: d.shards, DB: db.DB(), Brokers: ctl.st.Kafka}
	if d.o.mysqlStop == "" || d.o.mysqlStart == "" {
		var pidFile string
		_ = db.DB().GetContext(octx, &pidFile, "SELECT @@pid_file")
		stop, start := defaultMySQLCommands(pidFile)
		if d.o.mysqlStop == "" {
			d.o.mysqlStop = stop
		}
		if d.o.mysqlStart == "" {
			d.o.mysqlStart = start
		}
	}
	d.logf("MariaDB drill commands: stop %q, start %q", d.o.mysqlStop, d.o.mysqlStart)
	return d, nil
}

func (d *drillEnv) close() {
	if d.extra != nil {
		d.extra.stop(syscall.SIGKILL, 5*time.Second)
	}
	if d.proxy != nil {
		d.proxy.close()
	}
	if d.stopFollow != nil {
		d.stopFollow()
	}
	if d.pool != nil {
		d.pool.Close()
	}
	if d.db != nil {
		d.db.Close()
	}
}

// openShards connects to every shard the way the services do: on a stack under
// Redis Sentinel the clients follow the elected masters, so after a failover the
// checker reads the promoted server, not the dead master come back (stale, from
// its own disk, until the sentinels make it a replica).
func (d *drillEnv) openShards(ctx context.Context) error {
	p, err := shardpool.New(d.ctl.st.Redis, redis.Options{DialTimeout: time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	d.pool = p
	for i := range d.ctl.st.Redis {
		d.shards = append(d.shards, p.Client(i))
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.stopFollow = cancel
	follow := shardpool.FollowSentinels(fctx, p, d.ctl.st.Sentinels, d.ctl.st.SentinelPrefix, redis.Options{}, slog.New(slog.NewTextHandler(d.log, nil)), nil)
	go func() { _ = follow(fctx) }()
	return nil
}

func (d *drillEnv) logf(format string, args ...any) {
	fmt.Fprintf(d.log, "%s drill: %s\n", time.Now().UTC().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (d *drillEnv) promotions() []checker.Promotion {
	var out []checker.Promotion
	for _, r := range d.rounds {
		out = append(out, r.promotions()...)
	}
	return out
}

// fencedShards reads the shards grab-service fences (its ops listener's /readyz
// lists them; the public one says status alone).
func fencedShards(base string) ([]int, error) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(base + "/readyz")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var doc struct {
		Fenced []struct {
			Shard int `json:"shard"`
		} `json:"fencedShards"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return nil, fmt.Errorf("grab-service /readyz: %w", err)
	}
	var out []int
	for _, f := range doc.Fenced {
		out = append(out, f.Shard)
	}
	return out, nil
}

// shardAddrOf is where grab-service's /readyz says the switches point shard ("" for
// its flags' address).
func shardAddrOf(base string, shard int) (string, error) {
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(base + "/readyz")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var doc struct {
		Info struct {
			Switches struct {
				ShardAddrs map[string]string `json:"shardAddrs"`
			} `json:"switches"`
		} `json:"info"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return "", fmt.Errorf("grab-service /readyz: %w", err)
	}
	return doc.Info.Switches.ShardAddrs[strconv.Itoa(shard)], nil
}

// rebuildLost starts the drills from a whole stack: a `make up` after `make down`
// brings every Redis shard back empty while MySQL keeps the promotions of earlier
// runs, and grab-service fences those shards until they are rebuilt from the record
// (bin/recovery rebuild --missing), as on-call would.
func (d *drillEnv) rebuildLost(ctx context.Context) error {
	deadline := time.Now().Add(2 * time.Minute)
	for attempt := 0; ; attempt++ {
		time.Sleep(500 * time.Millisecond) // one fence poll
		fenced, err := fencedShards(d.ctl.st.Ops.Grab)
		if err != nil {
			return err
		}
		if len(fenced) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("shards %v stay fenced after bin/recovery rebuild --missing", fenced)
		}
		if attempt == 0 {
			fmt.Fprintf(os.Stderr, "drill: shards %v came back empty; rebuilding them from the record first\n", fenced)
		}
		cmd := exec.CommandContext(ctx, filepath.Join(d.o.root, "bin", "recovery"), "rebuild", "--missing", "--stack", d.o.stackFile, "--quiet")
		cmd.Dir = d.o.root
		out, err := cmd.CombinedOutput()
		d.logf("rebuild --missing: %s", out)
		if err != nil {
			d.logf("rebuild --missing failed: %v", err)
		}
	}
}
