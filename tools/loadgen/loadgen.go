// Package loadgen drives HTTP load at the platform for the demo, the benchmarks and
// the fault drills: keep-alive connections, bounded concurrency, a progress bar, and
// every answer kept so the invariant checks can compare them with Redis and MySQL.
package loadgen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Call is one request to send.
type Call struct {
	Method, Path string
	Body         any // JSON: []byte, json.RawMessage or string as it is, else encoding/json
	Token        string
	// Attempt, when above 0, is sent as X-Grab-Attempt: the caller's attempt number
	// for the grab's requestId (1 for its first send).
	Attempt int
}

// Answer is what came back for one call.
type Answer struct {
	Index   int
	Status  int // 0 when the request failed below HTTP
	Result  string
	Latency time.Duration
	Body    []byte
}

// Config sets the shape of a run.
type Config struct {
	BaseURL     string
	Concurrency int
	Calls       int
	Label       string // shown on the progress bar; empty hides the bar
	Timeout     time.Duration
	KeepBodies  bool // Run's answers keep their bodies (they are dropped otherwise)
}

// Client returns an HTTP client that keeps one connection per worker alive.
func Client(concurrency int, timeout time.Duration) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = concurrency * 2
	t.MaxIdleConnsPerHost = concurrency * 2
	t.MaxConnsPerHost = 0
	return &http.Client{Transport: t, Timeout: timeout}
}

// Run sends cfg.Calls calls made by gen over cfg.Concurrency workers and returns
// every answer, in call order. onAnswer, when set, sees each answer as it arrives.
// Each worker keeps one HTTP/1.1 connection of its own (conn.go) for an http://
// base; answers keep their bodies only when cfg.KeepBodies is set.
func Run(ctx context.Context, cfg Config, gen func(i int) Call, onAnswer func(Answer)) []Answer {
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	r := &runner{cfg: cfg, gen: gen, onAnswer: onAnswer, answers: make([]Answer, cfg.Calls)}
	host, lean := strings.CutPrefix(cfg.BaseURL, "http://")
	r.host, r.lean = host, lean && host != "" && !strings.ContainsAny(host, "/?#")
	if !r.lean {
		r.client = Client(cfg.Concurrency, cfg.Timeout)
		// The run's connections end with it: left idle, the server under test would
		// keep them (and a goroutine and buffers each, which its GC scans) into the
		// runs that follow.
		defer r.client.CloseIdleConnections()
	}
	return r.drive(ctx)
}

// RunTasks runs cfg.Calls tasks over cfg.Concurrency workers, as Run sends calls,
// with its progress bar, and returns their answers in task order: for load that a
// client sends (the checkout client, client/, retries included), task i making
// its own answer. cfg.BaseURL is not used.
func RunTasks(ctx context.Context, cfg Config, task func(ctx context.Context, i int) Answer, onAnswer func(Answer)) []Answer {
	r := &runner{cfg: cfg, task: task, onAnswer: onAnswer, answers: make([]Answer, cfg.Calls)}
	return r.drive(ctx)
}

// runner is one Run: its calls, where their answers go, and how far it got.
type runner struct {
	cfg      Config
	gen      func(i int) Call
	task     func(ctx context.Context, i int) Answer // RunTasks' instead of gen
	onAnswer func(Answer)
	host     string
	lean     bool         // each worker sends on a conn of its own to host
	client   *http.Client // else
	answers  []Answer
	next     atomic.Int64 // the next call's index
	done     atomic.Int64 // answers in
	mu       sync.Mutex   // serializes onAnswer
}

// drive runs the calls over cfg.Concurrency workers, showing the progress bar.
func (r *runner) drive(ctx context.Context) []Answer {
	stopBar := Progress(r.cfg.Label, r.cfg.Calls, &r.done)
	var wg sync.WaitGroup
	for w := 0; w < r.cfg.Concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.work(ctx)
		}()
	}
	wg.Wait()
	stopBar()
	return r.answers
}

// work is one worker. It takes the next call's index from a counter rather than
// from a channel a feeding goroutine fills, which cost a futex round trip per call
// (docs/design.md, "Drills and checker").
func (r *runner) work(ctx context.Context) {
	var k *conn
	if r.lean {
		k = newConn(r.host, r.cfg.Timeout)
		defer k.close()
	}
	for ctx.Err() == nil {
		i := int(r.next.Add(1) - 1)
		if i >= r.cfg.Calls {
			return
		}
		a := r.call(ctx, k, i)
		a.Index = i
		r.answers[i] = a
		if r.onAnswer != nil {
			r.mu.Lock()
			r.onAnswer(a)
			r.mu.Unlock()
		}
		r.done.Add(1)
	}
}

// call sends call i on k (nil unless the run is lean) and keeps its body only when
// the run keeps bodies.
func (r *runner) call(ctx context.Context, k *conn, i int) Answer {
	if r.task != nil {
		return r.task(ctx, i)
	}
	if k != nil {
		a := k.do(ctx, r.gen(i))
		if r.cfg.KeepBodies {
			a.Body = bytes.Clone(a.Body)
		} else {
			a.Body = nil
		}
		return a
	}
	a := Do(ctx, r.client, r.cfg.BaseURL, r.gen(i))
	if !r.cfg.KeepBodies {
		a.Body = nil
	}
	return a
}

// Progress shows a run's progress bar on stderr (none without a label), redrawn
// from done, the count of answers, ten times a second rather than by every worker
// for every answer; the function it returns draws the last count and removes it.
func Progress(label string, calls int, done *atomic.Int64) func() {
	if label == "" {
		return func() {}
	}
	bar := progressbar.NewOptions(calls, progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(label), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
	quit, over := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(over)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				_ = bar.Set(int(done.Load()))
			case <-quit:
				_ = bar.Set(int(done.Load()))
				_ = bar.Finish()
				return
			}
		}
	}()
	return func() { close(quit); <-over }
}

// Do sends one call and reads the answer's "result" field when it has one.
func Do(ctx context.Context, client *http.Client, base string, c Call) Answer {
	var body io.Reader
	if c.Body != nil {
		b, err := encodeBody(c.Body)
		if err != nil {
			return Answer{Result: "CLIENT_ERROR"}
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, base+c.Path, body)
	if err != nil {
		return Answer{Result: "CLIENT_ERROR"}
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Attempt > 0 {
		req.Header["X-Grab-Attempt"] = []string{strconv.Itoa(c.Attempt)}
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return Answer{Result: "TRANSPORT_ERROR", Latency: time.Since(start)}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := Answer{Status: resp.StatusCode, Latency: time.Since(start), Body: raw}
	a.Result = resultOf(raw)
	return a
}

// Summary condenses a run.
type Summary struct {
	Calls          int
	ByResult       map[string]int
	Elapsed        time.Duration
	P50, P99, P999 time.Duration
}

// Summarize counts answers by result and takes latency percentiles.
func Summarize(answers []Answer, elapsed time.Duration) Summary {
	s := Summary{Calls: len(answers), ByResult: map[string]int{}, Elapsed: elapsed}
	lat := make([]time.Duration, 0, len(answers))
	for _, a := range answers {
		key := a.Result
		if key == "" {
			key = fmt.Sprintf("HTTP_%d", a.Status)
		}
		s.ByResult[key]++
		lat = append(lat, a.Latency)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	s.P50, s.P99, s.P999 = Percentile(lat, 0.50), Percentile(lat, 0.99), Percentile(lat, 0.999)
	return s
}

// Percentile of sorted latencies.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

// Throughput is answers per second.
func (s Summary) Throughput() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Calls) / s.Elapsed.Seconds()
}

// Results lists the results, most frequent first.
func (s Summary) Results() []string {
	keys := make([]string, 0, len(s.ByResult))
	for k := range s.ByResult {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if s.ByResult[keys[i]] != s.ByResult[keys[j]] {
			return s.ByResult[keys[i]] > s.ByResult[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}
