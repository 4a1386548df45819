package grabtest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/flashsale/platform/internal/flow"
)

func kinds(events []flow.Event) []flow.Kind {
	var out []flow.Kind
	for _, e := range events {
		out = append(out, e.Kind)
	}
	return out
}

// The zero Publisher acknowledges everything and keeps it, whoever publishes.
func TestPublisherAcknowledgesAndRecords(t *testing.T) {
	var p Publisher
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Publish(context.Background(), flow.Event{Kind: flow.Grab}, flow.Event{Kind: flow.Cancel}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := len(p.Events()); n != 100 {
		t.Fatalf("%d events recorded, want 100", n)
	}
}

// Fail refuses before Next sees anything; LoseAck answers an error for what
// Next took, which is recorded; After sees only what Next took.
func TestPublisherFaults(t *testing.T) {
	broker := &Publisher{}
	var after [][]flow.Kind
	refused, lost := errors.New("refused"), errors.New("ack lost")
	p := &Publisher{Next: broker,
		Fail: func(_ context.Context, events []flow.Event) error {
			if events[0].Kind == flow.Confirm {
				return refused
			}
			return nil
		},
		After: func(events []flow.Event) { after = append(after, kinds(events)) },
		LoseAck: func(events []flow.Event) error {
			if events[0].Kind == flow.Cancel {
				return lost
			}
			return nil
		},
	}
	ctx := context.Background()
	if err := p.Publish(ctx, flow.Event{Kind: flow.Grab}); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(ctx, flow.Event{Kind: flow.Confirm}); err != refused {
		t.Fatalf("CONFIRM: %v, want refused", err)
	}
	if err := p.Publish(ctx, flow.Event{Kind: flow.Cancel}); err != lost {
		t.Fatalf("CANCEL: %v, want the lost acknowledgement", err)
	}
	want := []flow.Kind{flow.Grab, flow.Cancel}
	if got := kinds(broker.Events()); !slices.Equal(got, want) {
		t.Fatalf("the broker took %v, want %v", got, want)
	}
	if got := kinds(p.Events()); !slices.Equal(got, want) {
		t.Fatalf("recorded %v, want %v", got, want)
	}
	if len(after) != 2 || p.InFlight() != 0 {
		t.Fatalf("After saw %v, %d in flight; want two publishes and none", after, p.InFlight())
	}
}

// Next's error is answered and nothing is recorded.
func TestPublisherPassesNextsError(t *testing.T) {
	down := errors.New("down")
	p := &Publisher{Next: &Publisher{Fail: func(context.Context, []flow.Event) error { return down }}}
	if err := p.Publish(context.Background(), flow.Event{Kind: flow.Grab}); err != down || len(p.Events()) != 0 {
		t.Fatalf("%v, %d recorded; want Next's error and none", err, len(p.Events()))
	}
}
