package flowsink_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/recovery/internal/flowsink"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
)

// Events Kafka deleted (retention) before the sink stored them must not be
// skipped in silence: the sink stops at that partition and says how many are lost
// (flashsale_sink_lost_events), and goes past them only when told (SkipLost).
// Before, it jumped to the partition's first offset with a warning, and the
// record lacked the lost grants for good.
func TestSinkStopsAtEventsLostToRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	brokers := rt.Kafka(t).ListenAddrs()
	db := rt.OpenStore(t)
	suffix := testenv.Suffix()
	promoID := "lost-" + suffix
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: flow.Topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: time.Millisecond, MaxAttempts: 20, WriteTimeout: time.Second}
	defer w.Close()
	write := func(from, n int) {
		t.Helper()
		var msgs []kafka.Message
		for i := from; i < from+n; i++ {
			b, _ := json.Marshal(flow.Event{EventID: fmt.Sprintf("e-%s-%d", suffix, i), Kind: flow.Grab, RequestID: fmt.Sprintf("%s-%d", promoID, i),
				Pin: "p", IP: "10.0.0.1", Items: []flow.Item{{PromoID: promoID, Type: 1, Num: 1, Shard: 3}}, OccurredAt: flow.Stamp(time.Now())})
			msgs = append(msgs, kafka.Message{Key: []byte(promoID), Value: b}) // one key: one partition
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			t.Fatalf("write events: %v", err)
		}
	}
	stored := func() int64 {
		n, err := db.Flows.GrantedByRecord(ctx, promoID, 1)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitStored := func(want int64) {
		t.Helper()
		for deadline := time.Now().Add(testenv.Deadline(10 * time.Second)); stored() != want; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the record holds %d events, want %d", stored(), want)
			}
		}
	}

	group := "lost-" + suffix
	write(0, 10)
	_, stop := rt.RunSink(t, brokers, group, db.Flows)
	waitStored(10)
	stop()
	write(10, 10)
	deleteAll(t, brokers) // retention passes over the ten the sink never stored
	write(20, 10)

	m, stop := rt.RunSink(t, brokers, group, db.Flows)
	for deadline := time.Now().Add(testenv.Deadline(10 * time.Second)); lostOf(m) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the sink never reported the events lost to retention")
		}
	}
	time.Sleep(500 * time.Millisecond) // room to go past them, which it must not
	if n := stored(); n != 10 || lostOf(m) != 10 {
		t.Fatalf("after the loss the record holds %d events (want 10: stopped there) and the sink reports %v lost (want 10)", n, lostOf(m))
	}
	stop()

	rt.RunSinkWith(t, brokers, group, db.Flows, func(c *flowsink.Config) { c.SkipLost = true })
	waitStored(20) // on-call's decision: the ten after the gap; the ten in it are gone
}

// lostOf sums the sink's lost-events gauge over its partitions.
func lostOf(m *flowsink.Metrics) float64 {
	var sum float64
	for part := range 16 {
		sum += testutil.ToFloat64(m.LostEvents.WithLabelValues(fmt.Sprint(part)))
	}
	return sum
}

// deleteAll deletes every record each partition of the flow topic holds, as
// retention would (DeleteRecords up to the high watermark, -1).
func deleteAll(t *testing.T, brokers []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrDeleteRecordsRequest()
	topic := kmsg.NewDeleteRecordsRequestTopic()
	topic.Topic = flow.Topic
	for p := range int32(16) {
		part := kmsg.NewDeleteRecordsRequestTopicPartition()
		part.Partition, part.Offset = p, -1
		topic.Partitions = append(topic.Partitions, part)
	}
	req.Topics = append(req.Topics, topic)
	req.TimeoutMillis = 5000
	shards := cl.RequestSharded(context.Background(), req)
	for _, sh := range shards {
		if sh.Err != nil {
			t.Fatalf("delete records: %v", sh.Err)
		}
		for _, tp := range sh.Resp.(*kmsg.DeleteRecordsResponse).Topics {
			for _, p := range tp.Partitions {
				if err := kerrErr(p.ErrorCode); err != nil {
					t.Fatalf("delete records of partition %d: %v", p.Partition, err)
				}
			}
		}
	}
}

func kerrErr(code int16) error {
	if code == 0 {
		return nil
	}
	return fmt.Errorf("kafka error code %d", code)
}
