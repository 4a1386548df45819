package flowsink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/testenv"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
)

// After its broker restarts, the sink must rejoin and resume within a second or so.
// Found by the Kafka fault drill: kafka-go retried the lost group coordinator only
// every 5 s (its default JoinGroupBackoff), so for 5 s after Kafka was back nothing
// reached MySQL; rebuilds waited, and a local broker restarted again meanwhile took
// every grant of those seconds with it.
func TestSinkResumesSoonAfterTheBrokerRestarts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	broker := func() *kfake.Cluster {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.SeedTopics(16, flow.Topic), kfake.SeedTopics(1, "promo-grab-flow-dlq"))
		if err != nil {
			t.Fatalf("kfake on port %d: %v", port, err)
		}
		return c
	}
	first := broker()
	brokers := []string{fmt.Sprintf("127.0.0.1:%d", port)}
	db := rt.OpenStore(t)
	rt.RunSink(t, brokers, "sink-restart", db.Flows)
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: flow.Topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, MaxAttempts: 20, WriteTimeout: time.Second}
	defer w.Close()
	suffix := testenv.Suffix()
	write := func(from, n int) {
		var msgs []kafka.Message
		for i := from; i < from+n; i++ {
			rid := fmt.Sprintf("restart-%s-%d", suffix, i)
			b, _ := json.Marshal(flow.Event{EventID: fmt.Sprintf("e-%s-%d", suffix, i), Kind: flow.Grab, RequestID: rid, Pin: "p", IP: "10.0.0.1",
				Items: []flow.Item{{PromoID: "restart-" + suffix, Type: 1, Num: 1, Shard: 3}}, OccurredAt: flow.Stamp(time.Now())})
			msgs = append(msgs, kafka.Message{Key: []byte(rid), Value: b})
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := w.WriteMessages(wctx, msgs...); err != nil {
			t.Fatalf("write events: %v", err)
		}
	}
	stored := func(want int64, within time.Duration) time.Duration {
		start := time.Now()
		for {
			n, err := db.Flows.GrantedByRecord(ctx, "restart-"+suffix, 1)
			if err == nil && n == want {
				return time.Since(start)
			}
			if time.Since(start) > within {
				t.Fatalf("the record holds %d of %d events after %s (err %v)", n, want, within, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	write(0, 10)
	stored(10, 20*time.Second)
	first.Close() // an in-memory broker: everything it held, group offsets included, is gone
	time.Sleep(100 * time.Millisecond)
	second := broker()
	defer second.Close()
	write(10, 10)
	if took, bound := stored(20, 20*time.Second), testenv.Deadline(3*time.Second); took > bound {
		t.Fatalf("the sink resumed %s after the broker came back; want within %s", took.Round(time.Millisecond), bound)
	}
}
