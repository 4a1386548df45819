package flowsink_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/testenv"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
)

// Two sinks share the group while events flow, on partitions led by three brokers:
// a second member joins, the first leaves, and every event is in the record once.
// Each rebalance hands a partition over from the offset its last owner committed,
// so what the last owner had fetched and not committed is stored twice, which the
// record dedupes.
func TestSinksShareTheGroupAcrossRebalances(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(16, flow.Topic), kfake.SeedTopics(1, "promo-grab-flow-dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	db := rt.OpenStore(t)
	suffix := testenv.Suffix()
	promo := "group-" + suffix
	// Events flow until the first member has left and the second has consumed some
	// (1,500 at least, about 1,000 a second): on a slow machine the members' joins
	// and the leave may come after 1.5 s, and a flow that had ended by then left
	// the second member nothing to consume.
	const atLeast = 1500
	var handedOver, flowEnded atomic.Bool // the first member left and the second consumed; the flow stopped
	var events int64
	produced := make(chan error, 1)
	go func() {
		defer flowEnded.Store(true)
		w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: flow.Topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
			BatchTimeout: time.Millisecond}
		defer w.Close()
		giveUp := time.Now().Add(2 * time.Minute)
		for i := int64(0); i < atLeast || (!handedOver.Load() && time.Now().Before(giveUp)); i += 50 {
			var msgs []kafka.Message
			for j := i; j < i+50; j++ {
				e := flow.Event{EventID: fmt.Sprintf("e-%s-%d", suffix, j), Kind: flow.Grab, RequestID: fmt.Sprintf("group-%s-%d", suffix, j),
					Pin: "p", IP: "10.0.0.1", Items: []flow.Item{{PromoID: promo, Type: 1, Num: 1, Shard: 3}}, OccurredAt: flow.Stamp(time.Now())}
				msgs = append(msgs, kafka.Message{Key: []byte(e.RequestID), Value: e.AppendJSON(nil)})
			}
			if err := w.WriteMessages(context.Background(), msgs...); err != nil {
				produced <- err
				return
			}
			events = i + 50
			time.Sleep(50 * time.Millisecond)
		}
		produced <- nil
	}()

	_, stopA := rt.RunSink(t, brokers, "sink-group", db.Flows)
	time.Sleep(500 * time.Millisecond)
	mB, _ := rt.RunSink(t, brokers, "sink-group", db.Flows) // a second member: the group rebalances
	time.Sleep(500 * time.Millisecond)
	stopA() // the first leaves: its partitions go to the second
	// The flow ends by itself only on an error, or after two minutes.
	for testutil.ToFloat64(mB.Consumed) == 0 && !flowEnded.Load() {
		time.Sleep(20 * time.Millisecond)
	}
	handedOver.Store(true)
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	caughtUp(t, brokers, "sink-group", 60*time.Second)
	if n, err := db.Flows.GrantedByRecord(context.Background(), promo, 1); err != nil || n != events {
		t.Fatalf("the record holds %d of %d events (err %v)", n, events, err)
	}
	if testutil.ToFloat64(mB.Consumed) == 0 {
		t.Fatal("the second member consumed nothing")
	}
}
