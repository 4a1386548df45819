package flowlag_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/kafkaauth"
	"github.com/flashsale/platform/recovery/internal/flowlag"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
)

func TestLagCountsWhatTheGroupHasNotCommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	brokers := rt.Kafka(t).ListenAddrs()
	m := flowlag.NewMeter(brokers, kafkaauth.Auth{}, flow.Topic, "lag-test")

	// Nothing held: caught up at once (the bound is on the wait, not its speed).
	if err := m.WaitCaughtUp(ctx, 30*time.Second, 50*time.Millisecond); err != nil {
		t.Fatalf("empty topic: %v", err)
	}
	w := rt.FlowWriter(t, brokers)
	msgs := []kafka.Message{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte("2")}, {Key: []byte("c"), Value: []byte("3")}}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	ps, err := m.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 16 || flowlag.Total(ps) != 3 {
		t.Fatalf("%d partitions, lag %d; want 16 and 3", len(ps), flowlag.Total(ps))
	}
	if err := m.WaitCaughtUp(ctx, 5*time.Second, 50*time.Millisecond); !errors.Is(err, flowlag.ErrBehind) {
		t.Fatalf("nobody consumes: %v; want ErrBehind", err)
	}

	// A consumer of the group commits everything: caught up.
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, GroupID: "lag-test", Topic: flow.Topic, StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond})
	defer r.Close()
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for range msgs {
		msg, err := r.FetchMessage(rctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.CommitMessages(rctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.WaitCaughtUp(ctx, 10*time.Second, 50*time.Millisecond); err != nil {
		t.Fatalf("after the group committed: %v", err)
	}

	// No broker at all: a plain error, not a wait forever.
	dead := flowlag.NewMeter([]string{"127.0.0.1:1"}, kafkaauth.Auth{}, flow.Topic, "lag-test")
	if err := dead.WaitCaughtUp(ctx, 500*time.Millisecond, 50*time.Millisecond); err == nil {
		t.Fatal("no broker: want an error")
	}
}
