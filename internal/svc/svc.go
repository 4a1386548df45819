// Package svc is the plumbing every service's main shares: the common flags, the
// logger, bearer tokens from the environment, the HTTP server with its timeouts,
// and a run group that stops everything on SIGTERM.
package svc

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
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
	Listen   string
	Redis    []string
	MySQL    string
	Kafka    []string
	Switches string
	Local    bool
}

// DefaultRedis is the local stack: shard i on 127.0.0.1:7001+i.
func DefaultRedis() []string {
	out := make([]string, 16)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.0.1:%d", 7001+i)
	}
	return out
}

// Register binds the common flags on fs.
func (f *Flags) Register(fs *flag.FlagSet, listen string) {
	fs.StringVar(&f.Listen, "listen", listen, "HTTP listen address")
	fs.Func("redis", "comma-separated Redis master per logical shard (16; index = shard)", func(s string) error {
		f.Redis = split(s)
		return nil
	})
	fs.StringVar(&f.MySQL, "mysql", "root@tcp(127.0.0.1:3306)/flashsale?parseTime=true", "MySQL DSN of the system of record")
	fs.Func("kafka", "comma-separated Kafka bootstrap brokers", func(s string) error {
		f.Kafka = split(s)
		return nil
	})
	fs.StringVar(&f.Switches, "switches", ".run/switches.json", "switches document file (local stack)")
	fs.BoolVar(&f.Local, "local", false, "local mode: development tokens are allowed as defaults")
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

// TokenSpec names where a role's token comes from.
type TokenSpec struct {
	Env, LocalDefault string
	Role              httpx.Role
}

// Tokens reads each role's token (comma-separated for rotation) from its env var.
// Outside local mode a missing token is an error: there are no default credentials.
func Tokens(local bool, specs ...TokenSpec) (httpx.Tokens, error) {
	var ts httpx.Tokens
	for _, s := range specs {
		v := os.Getenv(s.Env)
		if v == "" && local {
			v = s.LocalDefault
		}
		if v == "" {
			return nil, fmt.Errorf("%s is not set (required outside --local)", s.Env)
		}
		for _, t := range split(v) {
			ts = append(ts, struct {
				Token string
				Role  httpx.Role
			}{t, s.Role})
		}
	}
	return ts, nil
}

// Server is an http.Server with every timeout set, so a slow or silent client
// cannot hold a connection forever; it gives every request an id and logs the
// failed and the slow ones.
func Server(addr string, h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           httpx.WithRequestID(httpx.AccessLog(log, withDeadline(h, handlerDeadline))),
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ReadHeaderTimeout: 2 * time.Second,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      handlerDeadline,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
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

// HTTP adds a server; on stop it stops accepting and lets in-flight requests finish.
func (gr *Group) HTTP(srv *http.Server) {
	gr.g.Add(func() error {
		gr.log.Info("listening", "addr", srv.Addr)
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
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
