package fanout

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every call waits until all have started, which only calls running at once can do.
func TestEachCallsEveryItemAtOnce(t *testing.T) {
	items := []int{10, 20, 30, 40}
	var started sync.WaitGroup
	started.Add(len(items))
	var sum atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		Each(items, func(i int, v int) {
			started.Done()
			started.Wait()
			sum.Add(int64(i * v))
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang guard, not a speed check
		t.Fatal("the calls did not run at once")
	}
	if got := sum.Load(); got != 0*10+1*20+2*30+3*40 {
		t.Fatalf("sum of i*v = %d", got)
	}
	Each([]int(nil), func(int, int) { t.Fatal("called for no item") })
}
