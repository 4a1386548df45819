package grab

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/testenv"
)

// A flood of calls on one shard is coalesced into pipelines, none longer than
// maxBatch (a script storm in one event-loop cycle stalls the whole shard), and
// every call gets its own reply.
func TestShardExecCoalescesWithinMaxBatch(t *testing.T) {
	t.Parallel()
	const calls, maxBatch = 200, 4
	c := testenv.StartRedis(t, testenv.Volatile).Client()
	reg := prometheus.NewRegistry()
	e := newShardExec(0, c, 1, maxBatch, calls, 5*time.Second, NewMetrics(reg))
	defer e.close()

	var wg sync.WaitGroup
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := e.do(context.Background(), func(p redis.Pipeliner) *redis.Cmd { return p.Do(context.Background(), "echo", i) })
			if v, err := cmd.Int(); err != nil || v != i {
				t.Errorf("call %d answered %v, %v", i, v, err)
			}
		}()
	}
	wg.Wait()

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "flashsale_grab_redis_pipeline_calls" {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		var withinMax uint64
		for _, b := range h.GetBucket() {
			if b.GetUpperBound() == maxBatch {
				withinMax = b.GetCumulativeCount()
			}
		}
		if h.GetSampleSum() != calls || withinMax != h.GetSampleCount() || h.GetSampleCount() >= calls {
			t.Fatalf("%v calls in %d pipelines, %d of them of at most %d calls: want %d calls, all within %d, coalesced into fewer pipelines than calls",
				h.GetSampleSum(), h.GetSampleCount(), withinMax, maxBatch, calls, maxBatch)
		}
		return
	}
	t.Fatal("no flashsale_grab_redis_pipeline_calls metric")
}
