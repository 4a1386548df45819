package publish

// The commit path's Kafka writes, measured: concurrent grabs publishing through one
// writer to an in-process Kafka-protocol broker (kfake, acks=all).
//   go test -bench KafkaBatch -run ^$ ./internal/publish            (BatchTimeout)
//   go test -bench KafkaPublishAllocs -benchmem -run ^$ ./internal/publish

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/kafkaauth"
)

// benchPublish runs 64 concurrent publishers (32 per core on 2 cores) through p,
// and reports the process's CPU per event beside the time: the in-process broker's
// work included, since fewer, larger produce requests are mostly the broker's gain.
func benchPublish(b *testing.B, p *Kafka) {
	var seq atomic.Int64
	cpu0 := processCPU()
	defer func() { b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op") }()
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
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchCluster(b *testing.B) *kfake.Cluster {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(16, flow.Topic))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cluster.Close)
	return cluster
}

// BenchmarkKafkaBatchTimeout chooses the BatchTimeout: too short and each event pays
// a round trip alone; too long and a lone grab waits for company.
func BenchmarkKafkaBatchTimeout(b *testing.B) {
	cluster := benchCluster(b)
	for _, timeout := range []time.Duration{500 * time.Microsecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond} {
		b.Run(fmt.Sprintf("batch=%s/inflight=64", timeout), func(b *testing.B) {
			p := NewKafka(cluster.ListenAddrs(), timeout, kafkaauth.Auth{})
			defer p.Close()
			benchPublish(b, p)
		})
	}
}

// BenchmarkKafkaPublishAllocs reports the garbage a publish makes.
func BenchmarkKafkaPublishAllocs(b *testing.B) {
	p := NewKafka(benchCluster(b).ListenAddrs(), 2*time.Millisecond, kafkaauth.Auth{})
	defer p.Close()
	b.Run("inflight=64", func(b *testing.B) {
		b.ReportAllocs()
		benchPublish(b, p)
	})
}
