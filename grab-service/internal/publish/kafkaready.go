package publish

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Kafka readiness is taken from the publisher's own traffic: an acknowledged
// batch within readyFresh says the brokers answer. Only a quiet publisher is
// checked by dialing, at most once per readyDialEvery, so however often /readyz is
// asked, the brokers see at most one connection (TLS and SASL included) a period.
const (
	readyFresh     = 5 * time.Second
	readyDialEvery = 2 * time.Second
	readyDialBound = time.Second
)

// kafkaReady remembers the last sign of life of the brokers.
type kafkaReady struct {
	lastAck atomic.Int64 // unix nanoseconds of the last acknowledged batch
	dial    func(ctx context.Context) error
	now     func() time.Time
	mu      sync.Mutex // held through a dial: concurrent askers share it
	dialAt  time.Time
	dialErr error
}

func newKafkaReady(dial func(ctx context.Context) error) *kafkaReady {
	return &kafkaReady{dial: dial, now: time.Now}
}

// acked records an acknowledgement from a broker.
func (r *kafkaReady) acked() { r.lastAck.Store(r.now().UnixNano()) }

// check is nil when a broker acknowledged lately, else the verdict of the last
// dial, dialing again when that is older than readyDialEvery.
func (r *kafkaReady) check(ctx context.Context) error {
	if r.fresh() {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fresh() {
		return nil
	}
	if !r.dialAt.IsZero() && r.now().Sub(r.dialAt) < readyDialEvery {
		return r.dialErr
	}
	// The verdict is shared: one asker's cancellation must not become everyone's.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readyDialBound)
	defer cancel()
	r.dialErr, r.dialAt = r.dial(dctx), r.now()
	return r.dialErr
}

func (r *kafkaReady) fresh() bool {
	at := r.lastAck.Load()
	return at != 0 && r.now().Sub(time.Unix(0, at)) < readyFresh
}
