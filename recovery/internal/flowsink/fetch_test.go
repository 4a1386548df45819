package flowsink

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/flow"
)

// arrivals is a consumer whose messages arrive one per call, and which records
// what happens, in order.
type arrivals struct {
	mu      sync.Mutex
	next    int64
	waits   int // fetches that waited
	log     []string
	commits [][]kafka.Message
}

func (a *arrivals) Fetch(ctx context.Context, batch []kafka.Message, max int, wait bool) ([]kafka.Message, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if wait {
		a.waits++
	}
	if max > 0 {
		e := flow.Event{EventID: "e", Kind: flow.Grab, RequestID: "r", Pin: "p", IP: "10.0.0.1",
			Items: []flow.Item{{PromoID: "A", Type: 1, Num: 1}}, OccurredAt: flow.Stamp(time.Now())}
		batch = append(batch, kafka.Message{Topic: flow.Topic, Partition: 3, Offset: a.next, Value: e.AppendJSON(nil)})
		a.next++
	}
	return batch, nil
}

func (a *arrivals) Commit(_ context.Context, msgs []kafka.Message) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.log = append(a.log, "commit")
	a.commits = append(a.commits, append([]kafka.Message(nil), msgs...))
	return nil
}

func (a *arrivals) Close() error { return nil }

// record fails its first failures writes, then takes them, logging each try in a.
type record struct {
	a        *arrivals
	failures int
}

func (r *record) InsertFlows(_ context.Context, events []flow.Event) (int, error) {
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	if r.failures > 0 {
		r.failures--
		r.a.log = append(r.a.log, "write failed")
		return 0, errors.New("mysql down")
	}
	r.a.log = append(r.a.log, "write")
	return len(events), nil
}

func testSink(cfg Config, c consumer, rec Record) *Sink {
	return &Sink{cfg: cfg, reader: c, rec: rec, m: NewMetrics(prometheus.NewRegistry()), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

// The window takes what has arrived a few times (fetchSteps), not a message at a
// time, and closes MaxWait after its first message.
func TestFetchTakesWhatArrivedEachStepOfTheWindow(t *testing.T) {
	cfg := Defaults()
	cfg.MaxWait = 50 * time.Millisecond
	a := &arrivals{}
	s := testSink(cfg, a, &record{a: a})
	start := time.Now()
	batch, _, err := s.fetch(context.Background())
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	// A step that oversleeps (a busy machine) leaves fewer steps in the window.
	if len(batch) < 2 || len(batch) > 1+fetchSteps || a.waits != 1 {
		t.Errorf("a window of %d steps: want 2 to %d messages after 1 waiting fetch, have %d after %d", fetchSteps, 1+fetchSteps, len(batch), a.waits)
	}
	if took < cfg.MaxWait || took > cfg.MaxWait+time.Second {
		t.Errorf("the window closed after %s; want %s", took, cfg.MaxWait)
	}
}

// A full batch closes the window at the step that fills it, a step being short
// however long the window.
func TestFetchClosesTheWindowAtMaxBatch(t *testing.T) {
	cfg := Defaults()
	cfg.MaxWait, cfg.MaxBatch = time.Minute, 2
	a := &arrivals{}
	s := testSink(cfg, a, &record{a: a})
	start := time.Now()
	batch, _, err := s.fetch(context.Background())
	if err != nil || len(batch) != 2 {
		t.Fatalf("want 2 messages, have %d (%v)", len(batch), err)
	}
	if took := time.Since(start); took > maxFetchStep+time.Second {
		t.Errorf("a full batch waited %s for a window of a minute", took)
	}
}

// Offsets are committed once MySQL holds the batch, after every failed try, and
// the commit names each message.
func TestHandleCommitsOnlyAfterTheWrite(t *testing.T) {
	cfg := Defaults()
	cfg.Backoff = Backoff{Min: time.Millisecond, Max: 2 * time.Millisecond}
	a := &arrivals{}
	s := testSink(cfg, a, &record{a: a, failures: 2})
	batch, err := a.Fetch(context.Background(), nil, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	batch, _ = a.Fetch(context.Background(), batch, 3, false)
	if err := s.Handle(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	want := []string{"write failed", "write failed", "write", "commit"}
	if len(a.log) != len(want) {
		t.Fatalf("want %v, have %v", want, a.log)
	}
	for i := range want {
		if a.log[i] != want[i] {
			t.Fatalf("want %v, have %v", want, a.log)
		}
	}
	if len(a.commits[0]) != 2 || a.commits[0][1].Offset != 1 {
		t.Errorf("the commit: want offsets 0 and 1, have %+v", a.commits[0])
	}
}
