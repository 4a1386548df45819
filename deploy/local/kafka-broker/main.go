// Command kafka-broker is the local stack's Kafka-protocol broker: one in-memory
// franz-go kfake broker with the platform's topics seeded, so the stack needs no JVM.
// Data lives only as long as the process (the local stack never keeps flows across a
// restart of the broker; MySQL is the system of record).
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Topics the platform relies on (CONTRACT.md, "Flow events"). Partition counts are
// seeded so that every client sees the same layout from its first metadata request.
const (
	flowTopic       = "promo-grab-flow"
	flowPartitions  = 16
	deadTopic       = "promo-grab-flow-dlq"
	deadPartitions  = 1
	defaultAutoPart = 1
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9092", "host:port to listen on")
	port := flag.Int("port", 0, "port to listen on (overrides the port of -addr when non-zero)")
	level := flag.String("log-level", "info", "log level: debug, info, warn, error")
	flag.Parse()

	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(os.Stderr, "bad -log-level %q: %v\n", *level, err)
		os.Exit(2)
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))

	host, p, err := splitAddr(*addr, *port)
	if err != nil {
		logger.Error("bad listen address", "addr", *addr, "err", err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	cluster, err := Start(host, p, logger)
	if err != nil {
		logger.Error("start broker", "err", err)
		os.Exit(1)
	}
	logger.Info("kafka broker listening", "addrs", cluster.ListenAddrs(),
		"topics", map[string]int{flowTopic: flowPartitions, deadTopic: deadPartitions})

	<-ctx.Done()
	logger.Info("shutting down")
	cluster.Close()
	logger.Info("stopped")
}

// Start runs a single-broker kfake cluster on host:port (port 0 picks a free one).
func Start(host string, port int, logger *slog.Logger) (*kfake.Cluster, error) {
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		// kfake always dials 127.0.0.1; rewrite the host so -addr is honoured.
		kfake.ListenFn(func(network, address string) (net.Listener, error) {
			_, p, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			return net.Listen(network, net.JoinHostPort(host, p))
		}),
		kfake.SeedTopics(flowPartitions, flowTopic),
		kfake.SeedTopics(deadPartitions, deadTopic),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(defaultAutoPart),
		kfake.WithLogger(slogAdapter{logger}),
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("kfake cluster on %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	return c, nil
}

func splitAddr(addr string, portOverride int) (string, int, error) {
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if portOverride != 0 {
		return host, portOverride, nil
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 0 || p > 65535 {
		return "", 0, fmt.Errorf("bad port %q", ps)
	}
	return host, p, nil
}

// slogAdapter forwards kfake's printf-style logs into the JSON log.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Logf(level kfake.LogLevel, format string, args ...any) {
	var l slog.Level
	switch level {
	case kfake.LogLevelError:
		l = slog.LevelError
	case kfake.LogLevelWarn:
		l = slog.LevelWarn
	case kfake.LogLevelInfo:
		// kfake logs every request at info; that is debug detail for us.
		l = slog.LevelDebug
	case kfake.LogLevelDebug:
		l = slog.LevelDebug - 4
	default:
		return
	}
	if !a.l.Enabled(context.Background(), l) {
		return
	}
	a.l.Log(context.Background(), l, fmt.Sprintf(format, args...), "component", "kfake")
}
