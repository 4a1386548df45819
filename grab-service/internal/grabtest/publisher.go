// Package grabtest holds what grab-service's tests share. It depends on
// internal/flow only, so that grab's own tests may import it.
package grabtest

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/flashsale/platform/internal/flow"
)

// Publisher stands in for Kafka where a test needs a fault the real broker
// (which the other tests use) cannot be made to give on cue. It hands events to
// Next, or acknowledges them itself when Next is nil, and keeps every event
// acknowledged, in order. Set its fields before the first Publish; a fault a
// test turns on and off reads the test's own state. Safe for concurrent use.
type Publisher struct {
	Next interface {
		Publish(ctx context.Context, events ...flow.Event) error
	}
	// Fail, when set, is asked first: its error fails the publish and nothing is
	// handed over (a broker that refuses).
	Fail func(ctx context.Context, events []flow.Event) error
	// After, when set, sees each publish Next acknowledged, before it returns.
	After func(events []flow.Event)
	// LoseAck, when set, is asked last: its error is answered though the events
	// were handed over (an acknowledgement lost after the broker wrote them).
	LoseAck func(events []flow.Event) error

	inFlight atomic.Int64
	mu       sync.Mutex
	acked    []flow.Event
}

// Publish runs Fail, hands the events over, records them, then runs After and
// LoseAck.
func (p *Publisher) Publish(ctx context.Context, events ...flow.Event) error {
	if p.Fail != nil {
		if err := p.Fail(ctx, events); err != nil {
			return err
		}
	}
	if err := p.handOver(ctx, events); err != nil {
		return err
	}
	p.mu.Lock()
	p.acked = append(p.acked, events...)
	p.mu.Unlock()
	if p.After != nil {
		p.After(events)
	}
	if p.LoseAck != nil {
		return p.LoseAck(events)
	}
	return nil
}

func (p *Publisher) handOver(ctx context.Context, events []flow.Event) error {
	if p.Next == nil {
		return nil
	}
	p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	return p.Next.Publish(ctx, events...)
}

// Events is every event acknowledged so far, in order.
func (p *Publisher) Events() []flow.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]flow.Event(nil), p.acked...)
}

// InFlight is the number of publishes waiting for Next's answer.
func (p *Publisher) InFlight() int64 { return p.inFlight.Load() }
