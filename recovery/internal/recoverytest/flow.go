package recoverytest

import (
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/store"
)

// KafkaAndStore is a flow test's surroundings: the brokers of an in-process Kafka
// cluster (Kafka) and a throwaway record (OpenStore), both gone when the test ends.
func KafkaAndStore(t testing.TB) ([]string, *store.Store) {
	t.Helper()
	return Kafka(t).ListenAddrs(), OpenStore(t)
}

// FlowWriter writes to the flow topic of brokers as grab-service does (partitioned
// by key, acks=all), each write sent at once; closed when the test ends.
func FlowWriter(t testing.TB, brokers []string) *kafka.Writer {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: flow.Topic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	t.Cleanup(func() { _ = w.Close() })
	return w
}
