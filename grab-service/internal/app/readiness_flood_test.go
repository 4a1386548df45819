package app

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
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

// mysqlPingCounter is a TCP relay in front of the test's MariaDB that counts the
// COM_PING commands (a command packet: sequence 0, first byte 0x0e) clients send
// through it: database/sql's PingContext, which is Store.Ping. The server is real;
// only the count is the relay's. It returns dsn with its address moved to the relay.
func mysqlPingCounter(t *testing.T, dsn string) (string, *atomic.Int64) {
	t.Helper()
	addrRe := regexp.MustCompile(`@tcp\(([^)]+)\)`)
	m := addrRe.FindStringSubmatch(dsn)
	if m == nil {
		t.Fatalf("no tcp address in the MySQL DSN")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	pings := new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go relayMySQL(c, m[1], pings)
		}
	}()
	return addrRe.ReplaceAllString(dsn, "@tcp("+ln.Addr().String()+")"), pings
}

// relayMySQL copies one client's connection to server, packet by packet from the
// client, counting its COM_PINGs.
func relayMySQL(client net.Conn, server string, pings *atomic.Int64) {
	defer client.Close()
	up, err := net.Dial("tcp", server)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(client, up); client.Close() }()
	r := bufio.NewReader(client)
	for {
		var head [4]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return
		}
		body := make([]byte, int(head[0])|int(head[1])<<8|int(head[2])<<16)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		if head[3] == 0 && len(body) > 0 && body[0] == 0x0e {
			pings.Add(1)
		}
		if _, err := up.Write(append(head[:], body...)); err != nil {
			return
		}
	}
}

// Anyone may ask the public /readyz: a flood of it must cost the shards next to
// nothing and MySQL and Kafka nothing at all (grab-service's public verdict is the
// shards' alone; MySQL and Kafka are the ops listener's details), and its answer
// must name nothing internal. The shards are a redis-server of the test's own, so
// its command counts are the app's alone; MySQL is the machine's MariaDB behind a
// relay counting pings; Kafka a listener counting dials. The flood comes in two
// waves, a public verdict's age apart, so the public checks run more than once; the
// ops /readyz after it shows the counters do see a MySQL ping and a Kafka dial.
func TestPublicReadyzFloodCostsTheBackendsLittle(t *testing.T) {
	t.Parallel()
	server := testenv.StartRedis(t, testenv.Volatile)
	broker, dials := countingBroker(t)
	dsn, mysqlPings := mysqlPingCounter(t, testenv.MySQLDSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := New(ctx, Config{RedisAddrs: server.Addrs(), MySQLDSN: dsn, KafkaBrokers: []string{broker},
		KafkaBatchTimeout: 2 * time.Millisecond, Tokens: httpx.Tokens{{Token: "flood-checkout-token", Role: httpx.RoleCheckout}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Grab: grab.Defaults()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpx.Serve(nil, 0, a.Handler))
	t.Cleanup(func() { srv.Close(); a.Close() })
	shard := server.Client()
	pingsBefore, dialsBefore, mysqlBefore := testenv.CommandCalls(t, shard)["ping"], dials.Load(), mysqlPings.Load()

	const flood, waves = 200, 2
	for w := range waves {
		if w > 0 {
			time.Sleep(httpx.PublicReadyMaxAge + 100*time.Millisecond) // the verdict has aged: the next wave runs the checks again
		}
		publicFlood(t, srv.URL+"/readyz", flood)
	}
	if pings := testenv.CommandCalls(t, shard)["ping"] - pingsBefore; pings < waves || pings > 2*waves {
		t.Errorf("%d public /readyz in %d waves cost the shard %d PINGs; want %d..%d (one run of the checks a wave)", waves*flood, waves, pings, waves, 2*waves)
	}
	if n := dials.Load() - dialsBefore; n != 0 {
		t.Errorf("%d public /readyz dialed Kafka %d times; want none: the public verdict is the shards' alone", waves*flood, n)
	}
	if n := mysqlPings.Load() - mysqlBefore; n != 0 {
		t.Errorf("%d public /readyz pinged MySQL %d times; want none: the public verdict is the shards' alone", waves*flood, n)
	}
	ops := httptest.NewServer(a.Ops)
	defer ops.Close()
	if b := get(t, ops.URL+"/readyz", http.StatusOK); !strings.Contains(b, `"info"`) || !strings.Contains(b, `"fencedShards"`) {
		t.Errorf("ops /readyz lost its details: %s", b)
	}
	// The detailed checks do reach both: the counters above can count. The kernel
	// completes a dial before the listener's Accept counts it, so the counters may
	// move a moment after the answer: wait for them, bounded.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end) && (dials.Load() == dialsBefore || mysqlPings.Load() == mysqlBefore); {
		time.Sleep(10 * time.Millisecond)
	}
	if dials.Load() == dialsBefore || mysqlPings.Load() == mysqlBefore {
		t.Errorf("ops /readyz: %d Kafka dials, %d MySQL pings; want both checked", dials.Load()-dialsBefore, mysqlPings.Load()-mysqlBefore)
	}
}

// publicFlood asks url n times at once and wants each answer the status alone.
func publicFlood(t *testing.T, url string, n int) {
	bodies := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bodies[i] = get(t, url, http.StatusOK)
		}()
	}
	wg.Wait()
	for _, b := range bodies {
		if b != `{"status":"ready"}` {
			t.Fatalf("public /readyz body %q; want the status alone", b)
		}
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
