package recoverytest

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/recovery/internal/flowsink"
)

// RunSink runs a flow sink until the returned stop is called (or the test ends).
func RunSink(t testing.TB, brokers []string, group string, rec flowsink.Record) (m *flowsink.Metrics, stop func()) {
	t.Helper()
	return RunSinkWith(t, brokers, group, rec, nil)
}

// RunSinkWith is RunSink with the test's changes to the sink's config (nil: none).
func RunSinkWith(t testing.TB, brokers []string, group string, rec flowsink.Record, change func(*flowsink.Config)) (m *flowsink.Metrics, stop func()) {
	t.Helper()
	cfg := flowsink.Defaults()
	cfg.Brokers, cfg.Group = brokers, group
	cfg.WriteTimeout = 2 * time.Second
	cfg.Backoff = flowsink.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	if change != nil {
		change(&cfg)
	}
	m = flowsink.NewMetrics(prometheus.NewRegistry())
	s, err := flowsink.New(cfg, rec, m, Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	if owed, ok := rec.(flowsink.OwedLog); ok { // as the sink command wires it, more often
		go func() { _ = s.RunOwed(ctx, owed, 100*time.Millisecond, time.Hour) }()
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sink: %v", err)
		}
		_ = s.Close()
	}
	t.Cleanup(stop)
	return m, stop
}

// Logger discards unless the test runs verbose with RECOVERY_TEST_LOG=1.
func Logger(t testing.TB) *slog.Logger {
	if testing.Verbose() && envLog {
		return slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
