package grab

// Memory cost of the commit path's Kafka writes: concurrent grabs publishing through
// one writer to an in-process Kafka-protocol broker (kfake, acks=all), allocations
// reported. kafka-go allocates a batch's message slice at the writer's BatchSize,
// whatever the batch then holds, so BatchSize drives the garbage a publish makes.
// go test -bench KafkaPublishAllocs -benchmem -run ^$ ./internal/grab

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flashsale/platform/internal/flow"
)

func BenchmarkKafkaPublishAllocs(b *testing.B) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(16, flow.Topic))
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Close()
	p := NewKafkaPublisher(cluster.ListenAddrs(), 2*time.Millisecond)
	defer p.Close()
	var seq atomic.Int64
	b.Run("inflight=64", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(32)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n := seq.Add(1)
				ev := flow.Event{EventID: newEventID(), Kind: flow.Grab, RequestID: fmt.Sprintf("r%d", n), Pin: "p", IP: "10.0.0.1",
					Items: []flow.Item{{PromoID: "A", Type: 1, Num: 1}}, OccurredAt: flow.Stamp(time.Now())}
				if err := p.Publish(context.Background(), ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
