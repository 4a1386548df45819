package grab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/flow"
)

// Publisher commits flow events: Publish returns nil only once every event is
// acknowledged by the record (Kafka with acks=all, or MySQL while degraded).
type Publisher interface {
	Publish(ctx context.Context, events ...flow.Event) error
}

// KafkaPublisher writes flow events to promo-grab-flow with kafka-go.
type KafkaPublisher struct {
	w       *kafka.Writer
	brokers []string
}

// NewKafkaPublisher makes the writer of the commit path. RequiredAcks is RequireAll:
// a grant must survive the loss of the partition leader. Writes are synchronous
// (never Async, whose errors are dropped); concurrent grabs share a batch, and
// batchTimeout bounds how long a lone event waits for company.
func NewKafkaPublisher(brokers []string, batchTimeout time.Duration) *KafkaPublisher {
	return &KafkaPublisher{brokers: brokers, w: &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Topic:        flow.Topic,
		Balancer:     &kafka.Hash{}, // the requestId key keeps a request's events in one partition
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: batchTimeout,
		// kafka-go allocates every batch's slice at BatchSize, and a 2 ms batch of one
		// partition holds a handful of grabs: 100 keeps that garbage small
		// (BenchmarkKafkaPublishAllocs) and flushes early only past ~50,000 events/s
		// per partition.
		BatchSize:  100,
		BatchBytes: 4 << 20,
		// Bounded so a write attempt always ends well inside the reconciler's margin:
		// an event still being retried could otherwise land after its own CANCEL.
		MaxAttempts:  2,
		WriteTimeout: time.Second,
		ReadTimeout:  time.Second,
	}}
}

// Publish sends events and waits for the acknowledgement.
func (p *KafkaPublisher) Publish(ctx context.Context, events ...flow.Event) error {
	msgs := make([]kafka.Message, len(events))
	for i, e := range events {
		b, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("encode %s event %s: %w", e.Kind, e.RequestID, err)
		}
		msgs[i] = kafka.Message{Key: []byte(e.RequestID), Value: b}
	}
	if err := p.w.WriteMessages(ctx, msgs...); err != nil {
		return fmt.Errorf("publish %d flow events: %w", len(events), err)
	}
	return nil
}

// Close flushes and closes the writer.
func (p *KafkaPublisher) Close() error { return p.w.Close() }

// newEventID is unique per event; deduplication in the record is on
// (requestId, kind, promotion), so a re-sent event may carry a new id.
func newEventID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Ping checks that a bootstrap broker answers (for /readyz).
func (p *KafkaPublisher) Ping(ctx context.Context) error {
	var err error
	for _, b := range p.brokers {
		var conn *kafka.Conn
		if conn, err = (&kafka.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", b); err == nil {
			return conn.Close()
		}
	}
	return fmt.Errorf("kafka: no broker answers: %w", err)
}
