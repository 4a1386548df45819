package publish

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/kafkaauth"
)

// A flood of Pings on a quiet publisher dials a broker once, not once each: the
// broker here is a listener that counts the connections it takes.
func TestPingFloodDialsOnce(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			t.Cleanup(func() { c.Close() })
		}
	}()
	p := newKafka([]string{ln.Addr().String()}, time.Millisecond, kafkaauth.Auth{})
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Ping(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := conns.Load(); n != 1 {
		t.Fatalf("100 Pings took %d connections; want 1", n)
	}
}

// An acknowledged batch answers Ping with no dial; a quiet publisher dials at
// most once per readyDialEvery and keeps that verdict meanwhile.
func TestKafkaReadyFromAcksThenBoundedDials(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	var dials int
	down := errors.New("down")
	r := newKafkaReady(func(context.Context) error { dials++; return down })
	r.now = func() time.Time { return now }
	r.acked()
	if err := r.check(context.Background()); err != nil || dials != 0 {
		t.Fatalf("after an ack: %v, %d dials; want nil, 0", err, dials)
	}
	now = now.Add(readyFresh)
	for range 3 {
		if err := r.check(context.Background()); !errors.Is(err, down) || dials != 1 {
			t.Fatalf("quiet publisher: %v, %d dials; want down, 1", err, dials)
		}
	}
	now = now.Add(readyDialEvery)
	_ = r.check(context.Background())
	if dials != 2 {
		t.Fatalf("after readyDialEvery: %d dials; want 2", dials)
	}
}
