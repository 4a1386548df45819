package svc

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A listener bounded at two holds two connections open: a third is not served
// until one of the two closes, and the metrics say so.
func TestMaxConnsHoldsTheBound(t *testing.T) {
	t.Parallel()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	limit := NewConnMetrics(prometheus.NewRegistry()).Limit("api", 2)
	g := NewGroup(log)
	g.HTTP(Server(addr, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), log), limit)
	stop := make(chan struct{})
	g.Loop(func(ctx context.Context) error {
		select {
		case <-stop:
		case <-ctx.Done():
		}
		return nil
	})
	ran := make(chan error, 1)
	go func() { ran <- g.Run() }()
	defer func() { close(stop); <-ran }()

	first, second := dialServed(t, addr), dialServed(t, addr)
	defer second.Close()
	third := dial(t, addr)
	defer third.Close()
	if served(third, 300*time.Millisecond) {
		t.Fatal("a third connection was served past a bound of 2")
	}
	if open, waits := testutil.ToFloat64(limit.open), testutil.ToFloat64(limit.waits); open != 2 || waits < 1 {
		t.Fatalf("connections open %v, waits %v; want 2 and at least 1", open, waits)
	}
	first.Close()
	if !served(third, 5*time.Second) {
		t.Fatal("the third connection was not served after the first closed")
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	for range 100 { // the group may not listen yet
		if c, err := net.Dial("tcp", addr); err == nil {
			return c
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s", addr)
	return nil
}

func dialServed(t *testing.T, addr string) net.Conn {
	t.Helper()
	c := dial(t, addr)
	if !served(c, 5*time.Second) {
		t.Fatal("a connection within the bound was not served")
	}
	return c
}

// served sends a GET on c, keeping it open, and reports whether an answer came within d.
func served(c net.Conn, d time.Duration) bool {
	_ = c.SetDeadline(time.Now().Add(d))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
