package app

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/testenv"
)

// countingBroker is a listener standing in for Kafka that counts the connections
// it takes; it answers nothing.
func countingBroker(t *testing.T) (addr string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), conns
}

// Anyone may ask the public /readyz: a flood of it must cost the shards and the
// brokers next to nothing, and its answer must name nothing internal. The shards
// are a redis-server of the test's own, so its command counts are the app's alone.
func TestPublicReadyzFloodCostsTheBackendsLittle(t *testing.T) {
	t.Parallel()
	server := testenv.StartRedis(t, testenv.Volatile)
	broker, dials := countingBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := New(ctx, Config{RedisAddrs: server.Addrs(), MySQLDSN: testenv.MySQLDSN(t), KafkaBrokers: []string{broker},
		KafkaBatchTimeout: 2 * time.Millisecond, Tokens: httpx.Tokens{{Token: "flood-checkout-token", Role: httpx.RoleCheckout}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Grab: grab.Defaults()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpx.Serve(nil, 0, a.Handler))
	t.Cleanup(func() { srv.Close(); a.Close() })
	shard := server.Client()
	pingsBefore, dialsBefore := testenv.CommandCalls(t, shard)["ping"], dials.Load()

	const flood = 200
	bodies := make([]string, flood)
	var wg sync.WaitGroup
	for i := range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bodies[i] = get(t, srv.URL+"/readyz", http.StatusOK)
		}()
	}
	wg.Wait()
	if pings := testenv.CommandCalls(t, shard)["ping"] - pingsBefore; pings > 2 {
		t.Errorf("%d public /readyz cost the shard %d PINGs; want at most 2", flood, pings)
	}
	if n := dials.Load() - dialsBefore; n > 1 {
		t.Errorf("%d public /readyz dialed Kafka %d times; want at most 1", flood, n)
	}
	for _, b := range bodies {
		if b != `{"status":"ready"}` {
			t.Fatalf("public /readyz body %q; want the status alone", b)
		}
	}
	ops := httptest.NewServer(a.Ops)
	defer ops.Close()
	if b := get(t, ops.URL+"/readyz", http.StatusOK); !strings.Contains(b, `"info"`) || !strings.Contains(b, `"fencedShards"`) {
		t.Errorf("ops /readyz lost its details: %s", b)
	}
}

// get GETs url, wants code, and returns the trimmed body.
func get(t *testing.T, url string, code int) string {
	resp, err := http.Get(url)
	if err != nil {
		t.Error(err)
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != code {
		t.Errorf("GET %s: %d %s; want %d", url, resp.StatusCode, b, code)
	}
	return strings.TrimSpace(string(b))
}
