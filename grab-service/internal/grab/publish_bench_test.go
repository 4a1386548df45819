package grab

// Chooses the Kafka BatchTimeout of the commit path by measurement: concurrent
// grabs publishing through one writer against a Kafka-protocol broker (in-process
// kfake, acks=all). Too short and each event pays a round trip alone; too long and
// a lone grab waits for company. go test -bench KafkaBatch -run ^$ ./internal/grab

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flashsale/platform/internal/flow"
)

func BenchmarkKafkaBatchTimeout(b *testing.B) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(16, flow.Topic))
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Close()
	for _, timeout := range []time.Duration{500 * time.Microsecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
		b.Run(fmt.Sprintf("batch=%s/inflight=64", timeout), func(b *testing.B) {
			p := NewKafkaPublisher(cluster.ListenAddrs(), timeout)
			defer p.Close()
			var seq atomic.Int64
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
}
