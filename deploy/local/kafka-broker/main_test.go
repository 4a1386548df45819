package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestBrokerServesPlatformClients checks the two things the platform needs from the
// local broker with the client the services use: produce acknowledged by all in-sync
// replicas, and a consumer group reading and committing what was produced.
func TestBrokerServesPlatformClients(t *testing.T) {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cluster, err := Start("127.0.0.1", 0, logger)
	if err != nil {
		t.Fatalf("start broker: %v", err)
	}
	t.Cleanup(cluster.Close)
	addr := cluster.ListenAddrs()[0]

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	t.Run("seeded topics", func(t *testing.T) {
		conn, err := kafka.DialContext(ctx, "tcp", addr)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		defer conn.Close()
		for topic, want := range map[string]int{flowTopic: flowPartitions, deadTopic: deadPartitions} {
			parts, err := conn.ReadPartitions(topic)
			if err != nil {
				t.Fatalf("read partitions of %s: %v", topic, err)
			}
			if have := len(parts); have != want {
				t.Errorf("topic %s: want %d partitions, have %d", topic, want, have)
			}
		}
	})

	t.Run("produce acks=all then consume in a group", func(t *testing.T) {
		const n = 50
		w := &kafka.Writer{
			Addr:         kafka.TCP(addr),
			Topic:        flowTopic,
			Balancer:     &kafka.Hash{},
			RequiredAcks: kafka.RequireAll,
			BatchTimeout: 5 * time.Millisecond,
		}
		defer w.Close()
		msgs := make([]kafka.Message, n)
		for i := range msgs {
			msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("req-%d", i)), Value: []byte(fmt.Sprintf(`{"i":%d}`, i))}
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			t.Fatalf("produce with RequireAll: %v", err)
		}

		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:        []string{addr},
			GroupID:        "broker-test",
			Topic:          flowTopic,
			StartOffset:    kafka.FirstOffset,
			MaxWait:        100 * time.Millisecond,
			CommitInterval: 0, // synchronous commits
		})
		defer r.Close()
		seen := map[string]bool{}
		for len(seen) < n {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatalf("fetch after %d of %d messages: %v", len(seen), n, err)
			}
			seen[string(m.Key)] = true
			if err := r.CommitMessages(ctx, m); err != nil {
				t.Fatalf("commit offset %d of partition %d: %v", m.Offset, m.Partition, err)
			}
		}
	})

	t.Run("auto topic creation", func(t *testing.T) {
		w := &kafka.Writer{
			Addr:                   kafka.TCP(addr),
			Topic:                  "broker-test-auto",
			RequiredAcks:           kafka.RequireAll,
			AllowAutoTopicCreation: true,
			BatchTimeout:           5 * time.Millisecond,
		}
		defer w.Close()
		var err error
		// The first write may race the topic's creation; kafka-go reports that as retriable.
		for range 20 {
			if err = w.WriteMessages(ctx, kafka.Message{Value: []byte("x")}); err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("produce to an auto-created topic: %v", err)
	})
}
