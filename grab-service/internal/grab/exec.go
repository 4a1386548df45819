package grab

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/lua"
)

// errShardBusy means a shard's queue stayed full until the caller's deadline.
var errShardBusy = errors.New("shard queue full")

// job is one script call waiting for its shard's next pipeline: queue's; a
// take, which may carry commits of the same promotions; or a commit, which rides
// such a take, else joins the pipeline's other commits in one commit.lua call.
type job struct {
	queue  func(redis.Pipeliner) *redis.Cmd
	take   *lua.GrabCall
	commit *lua.CommitCall
	riders []*job // the commits this take carries, in this pipeline
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
	parked   *parkedCommits // nil: a commit goes in the next pipeline, take or not
	// This shard's series, looked up once rather than per pipeline.
	latency prometheus.Observer
	errors  prometheus.Counter
}

// execConfig sizes a shard's executor (Config's Workers, MaxBatch, Queue,
// RedisTimeout and CommitLinger).
type execConfig struct {
	workers, maxBatch, queue int
	timeout, linger          time.Duration
}

func (c Config) exec() execConfig {
	return execConfig{workers: c.Workers, maxBatch: c.MaxBatch, queue: c.Queue, timeout: c.RedisTimeout, linger: c.CommitLinger}
}

func newShardExec(shard int, c redis.UniversalClient, cfg execConfig, m *Metrics) *shardExec {
	label := strconv.Itoa(shard)
	e := &shardExec{shard: shard, client: c, jobs: make(chan *job, cfg.queue), maxBatch: cfg.maxBatch, timeout: cfg.timeout, metrics: m,
		latency: m.redisLatency.WithLabelValues(label), errors: m.redisErrors.WithLabelValues(label)}
	if cfg.linger > 0 {
		e.parked = &parkedCommits{linger: cfg.linger, run: e.run}
	}
	for i := 0; i < cfg.workers; i++ {
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

// take runs one q.lua take; commits of the same promotions in its pipeline ride
// it (ride).
func (e *shardExec) take(ctx context.Context, call lua.GrabCall) *redis.Cmd {
	return e.wait(ctx, &job{take: &call, done: make(chan struct{})})
}

// commit commits one request's takes on the shard, as do would run its own
// commit.lua, but in a call the pipeline makes anyway: a take of the same
// promotions, which the commit rides, else one commit.lua for the pipeline's other
// commits. With a linger the commit waits up to it for such a take (park.go).
// Under load a grant then costs its shard one script call (BenchmarkShardCommit;
// docs/benchmarks.md).
//
// The call is not checked here: its take ran q.lua on the same requestId and keys,
// which refuses what commit.lua would (an empty requestId, a key twice).
func (e *shardExec) commit(ctx context.Context, call lua.CommitCall) (lua.CommitCode, error) {
	j := &job{commit: &call, done: make(chan struct{})}
	if e.parked == nil {
		return lua.ParseCommit(e.wait(ctx, j))
	}
	e.parked.park(j)
	<-j.done
	return lua.ParseCommit(j.cmd)
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

// close runs the parked commits and stops the workers.
func (e *shardExec) close() {
	if e.parked != nil {
		e.parked.flush()
	}
	close(e.jobs)
}

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
		if e.parked != nil {
			batch = e.parked.unpark(batch, e.maxBatch)
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
	apart := ride(batch)
	for _, j := range batch {
		switch {
		case j.take != nil:
			apart = append(apart, e.queueTake(ctx, pipe, j)...)
		case j.queue != nil:
			j.cmd = j.queue(pipe)
		}
	}
	for _, j := range batch {
		e.metrics.commitsRode.Add(float64(len(j.riders)))
	}
	e.metrics.commitsApart.Add(float64(len(apart)))
	var merged *redis.Cmd
	if len(apart) > 0 {
		calls := make([]lua.CommitCall, len(apart))
		for i, j := range apart {
			calls[i] = *j.commit
		}
		merged = lua.QueueCommits(ctx, pipe, calls)
	}
	_, _ = pipe.Exec(ctx) // each call's error stays on its own Cmd
	for _, j := range batch {
		if len(j.riders) > 0 {
			j.answerRiders()
		}
	}
	if merged != nil {
		answerApart(ctx, apart, merged)
	}
}

// ride seats each commit of the batch on a take of the same promotions, and
// answers the commits no take carries.
func ride(batch []*job) []*job {
	commits := false
	for _, j := range batch {
		j.riders = j.riders[:0]
		commits = commits || j.commit != nil
	}
	if !commits {
		return nil
	}
	takes := map[string]*job{}
	for _, j := range batch {
		if j.take != nil {
			sig := takeKeys(j.take)
			if _, ok := takes[sig]; !ok {
				takes[sig] = j
			}
		}
	}
	var apart []*job
	for _, j := range batch {
		if j.commit == nil {
			continue
		}
		if t, ok := takes[strings.Join(j.commit.Keys, "\x00")]; ok {
			t.riders = append(t.riders, j)
		} else {
			apart = append(apart, j)
		}
	}
	return apart
}

// takeKeys is a take's promotions as ride matches them to a commit's.
func takeKeys(c *lua.GrabCall) string {
	var b strings.Builder
	for i, it := range c.Items {
		if i > 0 {
			b.WriteByte(0)
		}
		b.WriteString(it.Key)
	}
	return b.String()
}

// queueTake queues a take with its riders. A take refused before it is sent (a
// malformed call) carries none: it answers the riders it would have carried, for
// commit.lua.
func (e *shardExec) queueTake(ctx context.Context, pipe redis.Pipeliner, j *job) []*job {
	call := *j.take
	for _, r := range j.riders {
		call.Commits = append(call.Commits, r.commit.RequestID)
	}
	if j.cmd = lua.QueueGrab(ctx, pipe, call); j.cmd.Err() == nil || len(j.riders) == 0 {
		return nil
	}
	riders := j.riders
	j.riders = nil
	j.cmd = lua.QueueGrab(ctx, pipe, *j.take)
	return riders
}

// answerRiders splits a take's reply into its own and its riders' (an error of
// the call is everyone's: NOSCRIPT then runs them all again).
func (j *job) answerRiders() {
	take, codes, err := lua.ParseGrabCommits(j.cmd, len(j.riders))
	j.cmd = take
	for i, r := range j.riders {
		if err != nil {
			r.cmd = redis.NewCmdResult(nil, err)
		} else {
			r.cmd = redis.NewCmdResult([]any{int64(codes[i])}, nil)
		}
	}
}

// answerApart gives each commit of the pipeline's commit.lua call its own reply,
// as though it had been a call of its own.
func answerApart(ctx context.Context, commits []*job, merged *redis.Cmd) {
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
