package loadgen

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestCPUPerRequest measures this process's CPU (getrusage, user + system) per
// request against a server outside it: LOADGEN_CPU_URL=http://127.0.0.1:port, for
// example `bin/bench --serve bare`. LOADGEN_CPU_CALLS and LOADGEN_CPU_CONC set the
// run (100000 calls, 64 workers by default), LOADGEN_CPU_LABEL shows the progress
// bar as the bench does. With LOADGEN_CPU_PROMO every call is a new grab of that
// promotion (a unique requestId, pin and ip), as the bench's hot phase sends;
// without it every call sends the same body. Skipped without the URL.
func TestCPUPerRequest(t *testing.T) {
	base := os.Getenv("LOADGEN_CPU_URL")
	if base == "" {
		t.Skip("LOADGEN_CPU_URL not set")
	}
	calls, conc := envInt("LOADGEN_CPU_CALLS", 100_000), envInt("LOADGEN_CPU_CONC", 64)
	body := json.RawMessage(`{"requestId":"cpu-000000000","pin":"p1","ip":"198.18.0.1","items":[{"promoId":"cpu-promo","type":1,"num":1}]}`)
	gen := func(i int) Call {
		return Call{Method: "POST", Path: "/v1/grab", Token: "t", Body: body, Attempt: 1}
	}
	if promo := os.Getenv("LOADGEN_CPU_PROMO"); promo != "" {
		run := strconv.FormatInt(time.Now().UnixNano(), 36)
		var seq atomic.Int64 // the warm-up's calls and the run's share one count: ids never repeat
		gen = func(int) Call {
			return Call{Method: "POST", Path: "/v1/grab", Token: "dev-checkout-token", Body: grabBody(run, promo, seq.Add(1)), Attempt: 1}
		}
	}
	ctx := context.Background()
	Run(ctx, Config{BaseURL: base, Concurrency: conc, Calls: conc * 20}, gen, nil) // warm-up
	beforeU, beforeS := rusage(t)
	start := time.Now()
	answers := Run(ctx, Config{BaseURL: base, Concurrency: conc, Calls: calls, Label: os.Getenv("LOADGEN_CPU_LABEL")}, gen, nil)
	elapsed := time.Since(start)
	afterU, afterS := rusage(t)
	user, sys := afterU-beforeU, afterS-beforeS
	s := Summarize(answers, elapsed)
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(calls) }
	t.Logf("%d calls at c=%d in %s (%.0f/s): %.1f µs of CPU per request (user %.1f, system %.1f); %v; p50 %s p99 %s",
		calls, conc, elapsed.Round(time.Millisecond), s.Throughput(), per(user+sys), per(user), per(sys), s.ByResult, s.P50, s.P99)
}

// grabBody is grab n of a run: one unit of promo for buyer p<n> from a 198.18.x.y address.
func grabBody(run, promo string, n int64) []byte {
	b := make([]byte, 0, 160)
	b = append(b, `{"requestId":"`...)
	b = append(b, run...)
	b = append(b, '-')
	b = strconv.AppendInt(b, n, 10)
	b = append(b, `","pin":"p`...)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, `","ip":"198.18.`...)
	b = strconv.AppendInt(b, (n/250)%250, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, n%250+1, 10)
	b = append(b, `","items":[{"promoId":"`...)
	b = append(b, promo...)
	b = append(b, `","type":1,"num":1}]}`...)
	return b
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// rusage is this process's user and system CPU time so far.
func rusage(t *testing.T) (user, sys time.Duration) {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		t.Fatal(err)
	}
	return time.Duration(u.Utime.Nano()), time.Duration(u.Stime.Nano())
}
