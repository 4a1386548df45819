package flowsink_test

import (
	"context"
	"fmt"
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
	const events = 1500
	produced := make(chan error, 1)
	go func() {
		w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: flow.Topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
			BatchTimeout: time.Millisecond}
		defer w.Close()
		for i := 0; i < events; i += 50 { // about 1,000 events a second for 1.5 s
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
			time.Sleep(50 * time.Millisecond)
		}
		produced <- nil
	}()

	_, stopA := rt.RunSink(t, brokers, "sink-group", db)
	time.Sleep(500 * time.Millisecond)
	mB, _ := rt.RunSink(t, brokers, "sink-group", db) // a second member: the group rebalances
	time.Sleep(500 * time.Millisecond)
	stopA() // the first leaves: its partitions go to the second
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	caughtUp(t, brokers, "sink-group", 60*time.Second)
	if n, err := db.GrantedByRecord(context.Background(), promo, 1); err != nil || n != events {
		t.Fatalf("the record holds %d of %d events (err %v)", n, events, err)
	}
	if testutil.ToFloat64(mB.Consumed) == 0 {
		t.Fatal("the second member consumed nothing")
	}
}
