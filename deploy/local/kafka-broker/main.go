// Command kafka-broker is the local stack's Kafka-protocol broker: one franz-go kfake
// broker with the platform's topics seeded, so the stack needs no JVM.
//
// With -data-dir it keeps its log, its topics and the consumer groups' offsets in
// that directory, written before each produce is acknowledged: a broker killed and
// started again on the same directory serves every event it acknowledged, and the
// flow sink resumes from its committed offsets, as with Kafka. (Like Kafka by
// default, it does not fsync each write: what it acknowledged survives the process,
// not the machine.) Without it, everything lives only as long as the process.
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
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Topics the platform relies on (docs/CONTRACT.md, "Flow events"). Partition counts are
// seeded so that every client sees the same layout from its first metadata request.
const (
	flowTopic       = "promo-grab-flow"
	flowPartitions  = 16
	deadTopic       = "promo-grab-flow-dlq"
	deadPartitions  = 1
	stateTopic      = "promo-state" // docs/CONTRACT.md, "Promotion state events"
	statePartitions = 4
	defaultAutoPart = 1
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9092", "host:port to listen on")
	port := flag.Int("port", 0, "port to listen on (overrides the port of -addr when non-zero)")
	level := flag.String("log-level", "info", "log level: debug, info, warn, error")
	dataDir := flag.String("data-dir", "", "directory that keeps the log and the groups' offsets across restarts (default: memory only)")
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

	cluster, err := Start(host, p, *dataDir, logger)
	if err != nil {
		logger.Error("start broker", "err", err)
		os.Exit(1)
	}
	logger.Info("kafka broker listening", "addrs", cluster.ListenAddrs(), "dataDir", *dataDir,
		"topics", map[string]int{flowTopic: flowPartitions, deadTopic: deadPartitions, stateTopic: statePartitions})

	// Retention is applied on a timer of ours: kfake runs its own only for topics
	// that name a retention setting, and the seeded ones cannot.
	tick := time.NewTicker(retentionEvery)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			cluster.ApplyRetention()
		}
	}
	stop() // a second signal during the shutdown below ends the process at once
	logger.Info("shutting down")
	cluster.Close()
	logger.Info("stopped")
}

// What the broker keeps: each partition's log up to retentionBytes, in segments of
// segmentBytes, for at most a week (Kafka's default). The flow sink stores an event
// within milliseconds; the rest is for reading back (kcat, drills) and for a sink or
// MySQL that is down: 16 partitions of 64 MiB are about 2.5 million events, a quarter
// of an hour of the local stack's peak. Beyond that the oldest events go, stored or
// not, and the checker would report them as drift. A restart loads what is kept.
const (
	retentionBytes = 64 << 20
	segmentBytes   = 8 << 20
	retentionEvery = 10 * time.Minute
)

var retentionMs = (7 * 24 * time.Hour).Milliseconds()

// Start runs a single-broker kfake cluster on host:port (port 0 picks a free one),
// keeping its data in dataDir ("" for memory only).
func Start(host string, port int, dataDir string, logger *slog.Logger) (*kfake.Cluster, error) {
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
		kfake.SeedTopics(statePartitions, stateTopic),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(defaultAutoPart),
		kfake.WithLogger(slogAdapter{logger}),
		kfake.BrokerConfigs(map[string]string{
			"log.retention.bytes": strconv.Itoa(retentionBytes),
			"log.segment.bytes":   strconv.Itoa(segmentBytes),
			"log.retention.ms":    strconv.FormatInt(retentionMs, 10),
		}),
	}
	if dataDir != "" {
		opts = append(opts, kfake.DataDir(dataDir))
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
