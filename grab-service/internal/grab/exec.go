package grab

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/lua"
)

// errShardBusy means a shard's queue stayed full until the caller's deadline.
var errShardBusy = errors.New("shard queue full")

// job is one script call waiting for its shard's next pipeline: queue's, or a
// commit, which joins the pipeline's other commits in one commit.lua call.
type job struct {
	queue  func(redis.Pipeliner) *redis.Cmd
	commit *lua.CommitCall
	cmd    *redis.Cmd
	done   chan struct{}
}

// shardExec runs script calls on one shard. Calls that arrive while a pipeline is
// in flight are coalesced into the next one (up to maxBatch), so under load one
// round trip and one syscall pair carry many grabs; an idle shard adds no wait.
type shardExec struct {
	shard    int
	client   redis.UniversalClient
	jobs     chan *job
	maxBatch int
	timeout  time.Duration
	metrics  *Metrics
	// This shard's series, looked up once rather than per pipeline.
	latency prometheus.Observer
	errors  prometheus.Counter
}

func newShardExec(shard int, c redis.UniversalClient, workers, maxBatch, queue int, timeout time.Duration, m *Metrics) *shardExec {
	label := strconv.Itoa(shard)
	e := &shardExec{shard: shard, client: c, jobs: make(chan *job, queue), maxBatch: maxBatch, timeout: timeout, metrics: m,
		latency: m.redisLatency.WithLabelValues(label), errors: m.redisErrors.WithLabelValues(label)}
	for i := 0; i < workers; i++ {
		go e.loop()
	}
	return e
}

// do queues one call and waits for its reply. Once queued, the call may run, so
// do always waits for the pipeline (bounded by the executor's timeout): a take whose
// reply was dropped would be held until the reconciler found it.
func (e *shardExec) do(ctx context.Context, queue func(redis.Pipeliner) *redis.Cmd) *redis.Cmd {
	return e.wait(ctx, &job{queue: queue, done: make(chan struct{})})
}

// commit commits one request's takes on the shard, as do would run its own
// commit.lua, but in one call with the other commits of its pipeline: under load
// that is one script call for many grants, at a fifth less of the shard's CPU per
// commit (BenchmarkShardCommit).
//
// The call is not checked here: its take ran q.lua on the same requestId and keys,
// which refuses what commit.lua would (an empty requestId, a key twice).
func (e *shardExec) commit(ctx context.Context, call lua.CommitCall) (lua.CommitCode, error) {
	return lua.ParseCommit(e.wait(ctx, &job{commit: &call, done: make(chan struct{})}))
}

func (e *shardExec) wait(ctx context.Context, j *job) *redis.Cmd {
	select {
	case e.jobs <- j:
	case <-ctx.Done():
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(errShardBusy)
		return cmd
	}
	<-j.done
	return j.cmd
}

func (e *shardExec) close() { close(e.jobs) }

func (e *shardExec) loop() {
	batch := make([]*job, 0, e.maxBatch)
	for first := range e.jobs {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < e.maxBatch {
			select {
			case j, ok := <-e.jobs:
				if !ok {
					break fill
				}
				batch = append(batch, j)
			default:
				break fill
			}
		}
		e.run(batch)
	}
}

func (e *shardExec) run(batch []*job) {
	ctx, cancel := context.WithTimeout(context.Background(), e.timeout)
	defer cancel()
	start := time.Now()
	e.exec(ctx, batch)
	// A restarted Redis has lost its scripts: load them and run again just the calls
	// that answered NOSCRIPT (a NOSCRIPT reply means that call did not run).
	var again []*job
	for _, j := range batch {
		if lua.IsNoScript(j.cmd.Err()) {
			again = append(again, j)
		}
	}
	if len(again) > 0 && lua.Load(ctx, e.client) == nil {
		e.exec(ctx, again)
	}
	failed := false
	for _, j := range batch {
		if err := j.cmd.Err(); err != nil && !errors.Is(err, redis.Nil) {
			failed = true
		}
	}
	// Counted before the callers wake, so a caller's answer comes after its calls
	// are in the metrics.
	e.latency.Observe(time.Since(start).Seconds())
	e.metrics.redisBatch.Observe(float64(len(batch)))
	if failed {
		e.errors.Inc()
	}
	for _, j := range batch {
		close(j.done)
	}
}

func (e *shardExec) exec(ctx context.Context, batch []*job) {
	pipe := e.client.Pipeline()
	var commits []*job
	var calls []lua.CommitCall
	for _, j := range batch {
		if j.commit != nil {
			commits, calls = append(commits, j), append(calls, *j.commit)
			continue
		}
		j.cmd = j.queue(pipe)
	}
	var merged *redis.Cmd
	if len(calls) > 0 {
		merged = lua.QueueCommits(ctx, pipe, calls)
	}
	_, _ = pipe.Exec(ctx) // each call's error stays on its own Cmd
	if merged == nil {
		return
	}
	// Each commit gets its own reply, as though it had been a call of its own.
	codes, err := lua.ParseCommits(merged, len(commits))
	for i, j := range commits {
		j.cmd = redis.NewCmd(ctx)
		switch {
		case merged.Err() != nil:
			j.cmd.SetErr(merged.Err()) // as the script answered it: NOSCRIPT is run again
		case err != nil:
			j.cmd.SetErr(err)
		default:
			j.cmd.SetVal([]any{int64(codes[i])})
		}
	}
}
