// Package svc is the plumbing every service's main shares: the common flags, the
// logger, bearer tokens from the environment, the HTTP server with its timeouts,
// and a run group that stops everything on SIGTERM.
package svc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/oklog/run"

	"github.com/flashsale/platform/internal/httpx"
)

// Flags are the settings every service takes; defaults are the local stack's.
type Flags struct {
	Listen string
	// OpsListen serves /metrics, the probes and (where a service offers it) pprof,
	// apart from the public API (httpx.OpsHandler).
	OpsListen string
	Redis     []string
	// RedisSentinels, when set, elect each shard's master (shardpool.Sentinels),
	// named RedisSentinelPrefix plus the shard.
	RedisSentinels      []string
	RedisSentinelPrefix string
	// RedisAllow is the servers a shardAddrs override may name (shardpool.Allowlist).
	RedisAllow []string
	MySQL      string
	// MySQLMigrate applies the schema migrations at start (store.Open); off, the
	// service only connects (store.Connect) and refuses a schema behind it: production
	// runs the migrate job (recovery migrate) as the migrator user instead.
	MySQLMigrate bool
	Kafka        []string
	Switches     string
	Local        bool
	// MaxConns bounds each listener's open connections (0: no bound); a value set
	// before Register is the flag's default, else DefaultMaxConns.
	MaxConns int
}

// MySQLEnv names the environment variable of the MySQL DSN (with _FILE: a file holding it).
const MySQLEnv = "FLASHSALE_MYSQL_DSN"

// RedisAllowEnv names the environment variable of --redis-allow's default: one
// value for every container of a pod or stack, set where the Redis credentials are.
const RedisAllowEnv = "FLASHSALE_REDIS_ALLOW"

const localMySQL = "flashsale:flashsale-local@tcp(127.0.0.1:3306)/flashsale?parseTime=true" // deploy/local/deps.sh

// Secret is the value of the environment variable env, or the content of the file
// that env + "_FILE" names (a mounted Kubernetes Secret), trimmed; "" when neither
// is set. Both set is an error: which one is meant is not clear.
func Secret(env string) (string, error) {
	v, file := os.Getenv(env), os.Getenv(env+"_FILE")
	switch {
	case file == "":
		return v, nil
	case v != "":
		return "", fmt.Errorf("both %s and %s_FILE are set; set one", env, env)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s_FILE: %w", env, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// DefaultRedis is the local stack: shard i on 127.0.0.1:7001+i.
func DefaultRedis() []string {
	out := make([]string, 16)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.0.1:%d", 7001+i)
	}
	return out
}

// Register binds the common flags on fs, with the service's listen addresses.
func (f *Flags) Register(fs *flag.FlagSet, listen, opsListen string) {
	fs.StringVar(&f.Listen, "listen", listen, "HTTP listen address of the API and the probes")
	fs.StringVar(&f.OpsListen, "ops-listen", opsListen, "HTTP listen address of /metrics, the probes and pprof: keep it off the public network")
	fs.Func("redis", "comma-separated Redis master per logical shard (16; index = shard)", func(s string) error {
		f.Redis = split(s)
		return nil
	})
	// The DSN holds a password: from the environment (or a file it names), which
	// /proc/<pid>/cmdline does not show; the flag is for the local stack and tests.
	f.MySQL = localMySQL
	if dsn, err := Secret(MySQLEnv); err == nil && dsn != "" {
		f.MySQL = dsn
	}
	fs.Func("mysql", "MySQL DSN of the system of record (default: $"+MySQLEnv+", or the file $"+MySQLEnv+"_FILE names, else the local stack's; "+
		"a DSN with a password belongs there, not in argv)", func(s string) error {
		f.MySQL = s
		return nil
	})
	fs.BoolVar(&f.MySQLMigrate, "mysql-migrate", true, "create the database and apply the schema migrations at start (needs a user with DDL rights: the local stack's); "+
		"--mysql-migrate=false only connects, as the service's own user, and refuses to start on a schema the migrate job (recovery migrate) has not brought up")
	fs.Func("redis-sentinels", "comma-separated Redis Sentinels that elect each shard's master (monitored as PREFIX0..PREFIX15); "+
		"the services follow their word, and on-call's shardAddrs still win", func(s string) error {
		f.RedisSentinels = split(s)
		return nil
	})
	fs.StringVar(&f.RedisSentinelPrefix, "redis-sentinel-prefix", "shard-", "the name prefix of the shards' masters in the sentinels")
	f.RedisAllow = split(os.Getenv(RedisAllowEnv))
	fs.Func("redis-allow", "comma-separated servers on-call's shardAddrs may name: a host or host:port, whose labels may be globs (redis-shard-*.redis-shard-*; "+
		"default: $"+RedisAllowEnv+", else the hosts of --redis); a switches document naming another is refused whole", func(s string) error {
		f.RedisAllow = split(s)
		return nil
	})
	fs.Func("kafka", "comma-separated Kafka bootstrap brokers", func(s string) error {
		f.Kafka = split(s)
		return nil
	})
	fs.StringVar(&f.Switches, "switches", ".run/switches.json", "switches document file (local stack)")
	fs.BoolVar(&f.Local, "local", false, "local mode: development tokens are allowed as defaults")
	if f.MaxConns == 0 {
		f.MaxConns = DefaultMaxConns
	}
	fs.IntVar(&f.MaxConns, "max-conns", f.MaxConns, "most connections each listener holds open; past it new ones wait in the kernel's queue (0 = no bound)")
	f.Redis, f.Kafka = DefaultRedis(), []string{"127.0.0.1:9092"}
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Logger is the one structured logger of a process.
// Records logged with a request's context carry its X-Request-Id.
func Logger(service string) *slog.Logger {
	return slog.New(httpx.ContextHandler{Handler: slog.NewJSONHandler(os.Stderr, nil)}).With("service", service)
}

// tokenName splits an entry "name:token" (whose token it is, for the audit trail
// and for approval's "not the proposer"; ':' is in neither hex nor base64). The
// name is normalised (NormalName), so "Alice" and " alice" are one person. An
// entry without a name is named by the first 8 hex digits of its SHA-256, which
// tells tokens apart without showing them; named says which it was.
func tokenName(entry string) (name, token string, named bool) {
	if n, t, ok := strings.Cut(entry, ":"); ok && NormalName(n) != "" {
		return NormalName(n), t, true
	}
	sum := sha256.Sum256([]byte(entry))
	return "token-" + hex.EncodeToString(sum[:4]), entry, false
}

// NormalName is a token's name as the services compare and record it: trimmed of
// white space and case-folded (lower case), so one person has one name however
// the entry spells it.
func NormalName(n string) string { return strings.ToLower(strings.TrimSpace(n)) }

// MinTokenLen is the shortest token accepted outside local mode.
const MinTokenLen = 16

// TokenSpec names where a role's token comes from.
type TokenSpec struct {
	Env, LocalDefault string
	Role              httpx.Role
}

// Tokens reads each role's token (comma-separated for rotation) from its env var
// or the file its _FILE variable names (Secret). Outside local mode a missing or
// placeholder (change-me-*) or short token is an error: no default credentials.
// Where approvers are among the roles, every merchandiser's and approver's entry
// must be "name:token": approval tells the proposer by name, and one person
// holding two hash-named tokens would be two people.
func Tokens(local bool, specs ...TokenSpec) (httpx.Tokens, error) {
	var ts httpx.Tokens
	people := !local && hasRole(specs, httpx.RoleApprover)
	var unnamed error // said once every variable is read, so a missing one is said first
	for _, s := range specs {
		v, err := Secret(s.Env)
		if err != nil {
			return nil, err
		}
		if v == "" && local {
			v = s.LocalDefault
		}
		if v == "" {
			return nil, fmt.Errorf("%s is not set (required outside --local)", s.Env)
		}
		for _, t := range split(v) {
			name, t, named := tokenName(t)
			if !local && (strings.HasPrefix(t, "change-me") || len(t) < MinTokenLen) {
				return nil, fmt.Errorf("%s holds a placeholder or a token shorter than %d characters; set a secret of your own (e.g. openssl rand -hex 24)",
					s.Env, MinTokenLen)
			}
			if people && !named && (s.Role == httpx.RoleMerchandiser || s.Role == httpx.RoleApprover) && unnamed == nil {
				unnamed = fmt.Errorf("%s has an entry without a name: with approval on, every %s token is given as name:token "+
					"(the person's name, e.g. alice:<token>), so that no one approves their own proposal", s.Env, s.Role)
			}
			ts = append(ts, struct {
				Token string
				Role  httpx.Role
				Name  string
			}{t, s.Role, name})
		}
	}
	if unnamed != nil {
		return nil, unnamed
	}
	return ts, nil
}

func hasRole(specs []TokenSpec, r httpx.Role) bool {
	for _, s := range specs {
		if s.Role == r {
			return true
		}
	}
	return false
}

// handlerDeadline bounds the context of every request (httpx.Serve): past the
// server's WriteTimeout the answer can no longer be written.
const handlerDeadline = 10 * time.Second

// Server is an http.Server with every timeout set, so a slow or silent client
// cannot hold a connection forever; it gives every request an id and logs the
// failed and the slow ones.
func Server(addr string, h http.Handler, log *slog.Logger) *http.Server {
	return server(addr, h, log, handlerDeadline)
}

func server(addr string, h http.Handler, log *slog.Logger, deadline time.Duration) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           httpx.Serve(log, deadline, h),
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      deadline,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
}

// opsDeadline bounds a request of the ops listener: past a minute, so that a CPU
// profile of pprof's default 30 s (or up to a minute) can be written, where the
// public listener's 10 s refused every profile of 10 s or more.
const opsDeadline = 65 * time.Second

// OpsServer is Server for the ops listener (--ops-listen): the same bounds but a
// deadline that leaves room for a profile. The listener is off the public network
// and its connections are bounded by --max-conns, so the longer hold costs little.
func OpsServer(addr string, h http.Handler, log *slog.Logger) *http.Server {
	return server(addr, h, log, opsDeadline)
}

// Group runs actors until one stops or SIGTERM/SIGINT arrives, then stops them all.
type Group struct {
	g   run.Group
	log *slog.Logger
}

// NewGroup makes a group with the signal handler already added.
func NewGroup(log *slog.Logger) *Group {
	gr := &Group{log: log}
	ctx, cancel := context.WithCancel(context.Background())
	gr.g.Add(func() error {
		sig := make(chan os.Signal, 2)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		select {
		case s := <-sig:
			log.Info("signal received; shutting down", "signal", s.String())
			return nil
		case <-ctx.Done():
			return nil
		}
	}, func(error) { cancel() })
	return gr
}

// HTTP adds a server whose listener limit bounds (nil: no bound); on stop it stops
// accepting and lets in-flight requests finish.
func (gr *Group) HTTP(srv *http.Server, limit *ConnLimit) {
	gr.g.Add(func() error {
		addr := srv.Addr
		if addr == "" {
			addr = ":http" // as ListenAndServe
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		gr.log.Info("listening", "addr", srv.Addr)
		if err := srv.Serve(limit.wrap(ln)); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}, func(error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
}

// Loop adds a background loop that runs until its context ends.
func (gr *Group) Loop(fn func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	gr.g.Add(func() error { return fn(ctx) }, func(error) { cancel() })
}

// Run blocks until the group stops.
func (gr *Group) Run() error { return gr.g.Run() }
