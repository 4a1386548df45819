package flowsink

// The sink's handling path, measured: Handle on batches of flow messages as
// grab-service writes them (a GRAB of 1 to 3 items, a CANCEL of every fifth grant,
// in this batch or a later one), decoded and stored in a throwaway MariaDB database
// of the local stack, the offsets committed to a stand-in for the group's reader.
//   go test -run '^$' -bench SinkHandle -benchmem -count 8 ./recovery/internal/flowsink/
// One op is one event. cpu-us/event is this process's CPU (user + system), the
// figure the whole-system bench gives the flow sink; mariadb-cpu-us/event is the
// server's (the stack's mariadbd, read from /proc), so that cost moved into MySQL
// shows.

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/testenv"
)

// committed stands in for the group's reader: it takes the commits and counts them.
type committed struct{ messages int }

func (c *committed) FetchMessage(ctx context.Context) (kafka.Message, error) {
	<-ctx.Done()
	return kafka.Message{}, ctx.Err()
}
func (c *committed) CommitMessages(_ context.Context, msgs ...kafka.Message) error {
	c.messages += len(msgs)
	return nil
}
func (c *committed) Close() error { return nil }

// benchPromos is how many promotions the events spread over (a batch updates each
// one's remaining once).
const benchPromos = 8

// benchMessages makes n flow messages: GRABs of 1 to 3 items, and a CANCEL of every
// fifth GRAB a few events later (so a batch holds CANCELs of its own GRABs and of
// the batch before), keyed by requestId as grab-service writes them.
func benchMessages(prefix string, n int) []kafka.Message {
	msgs := make([]kafka.Message, 0, n)
	var owed []flow.Event
	at := time.Now()
	for i := 0; len(msgs) < n; i++ {
		var e flow.Event
		if len(owed) > 0 && (i%7 == 0 || len(owed) > 20) {
			e, owed = owed[0], owed[1:]
			e.EventID, e.Kind, e.BodyHash, e.Reason = randHex(16), flow.Cancel, "", "USER_CANCELLED"
		} else {
			rid := prefix + "-" + strconv.Itoa(i)
			e = flow.Event{EventID: randHex(16), Kind: flow.Grab, RequestID: rid, Pin: "pin-" + strconv.Itoa(rand.IntN(100000)),
				IP: fmt.Sprintf("198.18.%d.%d", rand.IntN(256), rand.IntN(256)), BodyHash: randHex(32)}
			for k := range 1 + rand.IntN(3) {
				e.Items = append(e.Items, flow.Item{PromoID: "bench-" + strconv.Itoa((i+k)%benchPromos), Type: 1, Num: 1 + int64(rand.IntN(2)), Shard: rand.IntN(16)})
			}
			if i%5 == 0 {
				owed = append(owed, e)
			}
		}
		e.OccurredAt = flow.Stamp(at.Add(time.Duration(i) * time.Millisecond))
		msgs = append(msgs, kafka.Message{Topic: flow.Topic, Partition: i % 16, Offset: int64(i), Key: []byte(e.RequestID), Value: e.AppendJSON(nil)})
	}
	return msgs
}

func randHex(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return hex.EncodeToString(b)
}

func BenchmarkSinkHandle(b *testing.B) {
	db := benchStore(b)
	maria := mariadbPID()
	for _, size := range []int{50, 250, 500} {
		b.Run("batch="+strconv.Itoa(size), func(b *testing.B) {
			c := &committed{}
			s := &Sink{cfg: Defaults(), reader: c, rec: db.Flows, m: NewMetrics(prometheus.NewRegistry()),
				log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			msgs := benchMessages(fmt.Sprintf("b%d-%s", size, testenv.Suffix()), b.N)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0, maria0 := processCPU(), procCPU(maria)
			for from := 0; from < len(msgs); from += size {
				if err := s.Handle(ctx, msgs[from:min(from+size, len(msgs))]); err != nil {
					b.Fatal(err)
				}
			}
			cpu, mariaCPU := processCPU()-cpu0, procCPU(maria)-maria0
			b.StopTimer()
			if c.messages != len(msgs) {
				b.Fatalf("committed %d of %d messages", c.messages, len(msgs))
			}
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-us/event")
			if maria > 0 {
				b.ReportMetric(float64(mariaCPU.Nanoseconds())/1e3/float64(b.N), "mariadb-cpu-us/event")
			}
		})
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// mariadbPID finds the stack's mariadbd: the one started without a --port of its
// own (a test's server has one); 0 if there is none.
func mariadbPID() int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm")
		args, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.TrimSpace(string(comm)) == "mariadbd" && !strings.Contains(string(args), "--port") {
			return pid
		}
	}
	return 0
}

// procCPU is a process's user and system CPU time from /proc/<pid>/stat, in clock
// ticks of 10 ms.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) <= 12 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}
