package flowsink

// The whole sink, measured: Run consuming a Kafka-protocol broker (kfake) that lives,
// with the producer, in a process of its own (this test binary run again as
// TestBenchBrokerProcess), so the CPU this process reports is the sink's alone:
// kafka-go's fetches and commits, decoding, MySQL. One op is one event.
//   go test -run '^$' -bench SinkRun -benchmem -count 8 ./recovery/internal/flowsink/
// rate=backlog: the events are all in Kafka when the sink starts on them (fetches
// are full); rate=4000: they arrive at 4,000 a second, about the hot phase of the
// whole-system bench (fetches hold what a partition got since the last one).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
)

const benchChildEnv = "FLOWSINK_BENCH_BROKER"

func BenchmarkSinkRun(b *testing.B) {
	db := benchStore(b)
	maria := mariadbPID()
	for _, rate := range []int{0, 4000} {
		name := "rate=backlog"
		if rate > 0 {
			name = "rate=" + strconv.Itoa(rate)
		}
		b.Run(name, func(b *testing.B) {
			child := startBenchBroker(b)
			cfg := Defaults()
			cfg.Brokers, cfg.Group = []string{child.addr}, "bench-"+testenv.Suffix()
			m, stop := benchSink(b, cfg, db.Flows)
			consumed := func(n int, within time.Duration) {
				end := time.Now().Add(within)
				for int(testutil.ToFloat64(m.Consumed)) < n {
					if time.Now().After(end) {
						b.Fatalf("the sink consumed %v of %d events within %s", testutil.ToFloat64(m.Consumed), n, within)
					}
					time.Sleep(50 * time.Millisecond) // seldom: the polling is this process's CPU too
				}
			}
			const warm = 200 // the group joined, connections open
			child.produce(b, warm, 0)
			consumed(warm, 30*time.Second)
			b.ReportAllocs()
			b.ResetTimer()
			var cpu0, maria0 time.Duration
			if rate == 0 {
				// Everything in Kafka first, then a sink of the same group on it, from
				// the offsets the first committed: a backlog, as after an outage.
				b.StopTimer() // the production is not the sink's
				stop()
				child.produce(b, b.N, 0)
				b.StartTimer()
				cpu0, maria0 = processCPU(), procCPU(maria)
				m, stop = benchSink(b, cfg, db.Flows)
				consumed(b.N, 10*time.Minute)
			} else {
				cpu0, maria0 = processCPU(), procCPU(maria)
				child.produceAsync(b, b.N, rate)
				consumed(warm+b.N, 10*time.Minute)
			}
			cpu, mariaCPU := processCPU()-cpu0, procCPU(maria)-maria0
			b.StopTimer()
			stop()
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-us/event")
			if maria > 0 {
				b.ReportMetric(float64(mariaCPU.Nanoseconds())/1e3/float64(b.N), "mariadb-cpu-us/event")
			}
		})
	}
}

// benchSink runs a sink until stop (or the benchmark's end).
func benchSink(b *testing.B, cfg Config, rec Record) (*Metrics, func()) {
	m := NewMetrics(prometheus.NewRegistry())
	s, err := New(cfg, rec, m, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
		_ = s.Close()
	}
	b.Cleanup(stop)
	return m, stop
}

// benchStore is a throwaway database with the promotions benchMessages spreads over.
func benchStore(b *testing.B) *store.Store {
	db, err := store.Open(context.Background(), testenv.MySQLDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	for i := range benchPromos {
		if _, err := db.DB().Exec(`INSERT INTO promotion (promo_id, promo_type, total, start_at, end_at, state, remaining)
 VALUES (?, 1, 1000000000, NOW(3), NOW(3) + INTERVAL 1 DAY, 'ACTIVE', 1000000000)`, "bench-"+strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// benchBroker is the broker and producer process.
type benchBroker struct {
	addr string
	in   io.WriteCloser
	out  *bufio.Scanner
	wait func() error
	pend int // produce commands not answered yet
}

func startBenchBroker(b *testing.B) *benchBroker {
	cmd := exec.Command(os.Args[0], "-test.run=^TestBenchBrokerProcess$")
	cmd.Env = append(os.Environ(), benchChildEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &benchBroker{in: in, out: bufio.NewScanner(out), wait: cmd.Wait}
	b.Cleanup(func() { c.in.Close(); _ = c.wait() })
	c.addr = c.line(b, "addr ")
	return c
}

// line reads the child's output up to a line starting with prefix and returns the rest.
func (c *benchBroker) line(b *testing.B, prefix string) string {
	for c.out.Scan() {
		if rest, ok := strings.CutPrefix(c.out.Text(), prefix); ok {
			return rest
		}
	}
	b.Fatalf("the broker process ended before %q: %v", prefix, c.out.Err())
	return ""
}

func (c *benchBroker) produceAsync(b *testing.B, n, rate int) {
	if _, err := fmt.Fprintf(c.in, "produce %d %d %s\n", n, rate, testenv.Suffix()); err != nil {
		b.Fatal(err)
	}
	c.pend++
}

func (c *benchBroker) produce(b *testing.B, n, rate int) {
	c.produceAsync(b, n, rate)
	for ; c.pend > 0; c.pend-- {
		c.line(b, "produced ")
	}
}

// TestBenchBrokerProcess is BenchmarkSinkRun's broker and producer, run by it.
func TestBenchBrokerProcess(t *testing.T) {
	if os.Getenv(benchChildEnv) == "" {
		t.Skip("BenchmarkSinkRun's broker process")
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(16, flow.Topic), kfake.SeedTopics(1, DeadLetterTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	w := &kafka.Writer{Addr: kafka.TCP(cluster.ListenAddrs()...), Topic: flow.Topic, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, BatchSize: 1000}
	defer w.Close()
	fmt.Printf("addr %s\n", cluster.ListenAddrs()[0])
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var n, rate int
		var prefix string
		if _, err := fmt.Sscanf(in.Text(), "produce %d %d %s", &n, &rate, &prefix); err != nil {
			t.Fatalf("command %q: %v", in.Text(), err)
		}
		msgs := benchMessages(prefix, n)
		for i := range msgs {
			msgs[i] = kafka.Message{Key: msgs[i].Key, Value: msgs[i].Value}
		}
		start := time.Now()
		for sent := 0; sent < n; {
			due := n
			if rate > 0 {
				due = min(n, int(time.Since(start).Seconds()*float64(rate))+1)
			}
			to := min(due, sent+1000)
			if to > sent {
				if err := w.WriteMessages(context.Background(), msgs[sent:to]...); err != nil {
					t.Fatal(err)
				}
				sent = to
			}
			if rate > 0 && sent < n {
				time.Sleep(time.Millisecond)
			}
		}
		fmt.Printf("produced %d\n", n)
	}
}
