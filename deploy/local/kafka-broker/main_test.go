package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestBrokerServesPlatformClients checks the two things the platform needs from the
// local broker with the client the services use: produce acknowledged by all in-sync
// replicas, and a consumer group reading and committing what was produced.
func TestBrokerServesPlatformClients(t *testing.T) {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cluster, err := Start("127.0.0.1", 0, "", logger)
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

// TestMain lets the crash test run this package's main as a child process (the
// test binary re-executed), so the broker can be SIGKILLed as the drills do.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const childEnv = "KAFKA_BROKER_TEST_CHILD"

// A broker with -data-dir that is SIGKILLed and started again on the same
// directory serves every event it acknowledged (acks=all), and the consumer
// group's committed offsets: the flow sink resumes where it stopped and no
// acknowledged grant is lost with the broker.
func TestBrokerKeepsAcknowledgedEventsAcrossAKill(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	child := startChild(t, addr, dir)

	const n, consumed = 200, 100
	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: flowTopic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: 2 * time.Millisecond}
	msgs := make([]kafka.Message, n)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("req-%d", i)), Value: []byte(fmt.Sprintf(`{"i":%d}`, i))}
	}
	for i := 0; i < n; i += 20 { // several produce requests, as grabs send them
		if err := w.WriteMessages(ctx, msgs[i:i+20]...); err != nil {
			t.Fatalf("produce %d..%d: %v", i, i+19, err)
		}
	}
	w.Close()
	before := readGroup(ctx, t, addr, "sink", consumed)

	if err := child.Process.Kill(); err != nil { // SIGKILL: no shutdown of any kind
		t.Fatal(err)
	}
	waitClosed(t, addr)
	startChild(t, addr, dir)

	all := readGroup(ctx, t, addr, "after-restart", n)
	for i := range n {
		if !all[fmt.Sprintf("req-%d", i)] {
			t.Fatalf("event req-%d acknowledged before the kill is gone after the restart (%d of %d left)", i, len(all), n)
		}
	}
	// The group resumes from its committed offsets: the rest, none of it again.
	for key := range readGroup(ctx, t, addr, "sink", n-consumed) {
		if before[key] {
			t.Fatalf("group sink read %s again after the restart: its committed offsets were lost", key)
		}
	}
}

// waitClosed waits until nothing accepts on addr: the killed broker is gone.
func waitClosed(t *testing.T, addr string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("%s still accepts connections 10s after SIGKILL", addr)
		}
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startChild runs the broker on addr with dataDir and waits until it answers. The
// child dies with the test process (Pdeathsig), and a child that exits early (its
// port taken meanwhile) fails the test at once.
func startChild(t *testing.T, addr, dataDir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-addr", addr, "-data-dir", dataDir, "-log-level", "warn")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := kafka.Dial("tcp", addr)
		if err == nil {
			_, err = conn.ReadPartitions(flowTopic)
			conn.Close()
			if err == nil {
				return cmd
			}
		}
		select {
		case werr := <-exited:
			exited <- werr // for the cleanup
			t.Fatalf("broker on %s exited before answering: %v", addr, werr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("broker on %s not answering: %v", addr, err)
		}
	}
}

// readGroup reads want events of the flow topic as consumer group group, from the
// group's committed offsets (the first offset for a new group), committing each.
func readGroup(ctx context.Context, t *testing.T, addr, group string, want int) map[string]bool {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, GroupID: group, Topic: flowTopic,
		StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond, JoinGroupBackoff: 200 * time.Millisecond})
	defer r.Close()
	seen := map[string]bool{}
	for len(seen) < want {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("group %s: fetch after %d of %d events: %v", group, len(seen), want, err)
		}
		seen[string(m.Key)] = true
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatalf("group %s: commit: %v", group, err)
		}
	}
	return seen
}
