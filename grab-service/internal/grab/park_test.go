package grab

import (
	"sync"
	"testing"
	"time"
)

// A shard that does not answer holds one flush of parked commits, not one per
// linger: the commits parked meanwhile wait for it, then go together. The
// pipeline is a function here, so the test holds it as long as it likes.
func TestParkedCommitsFlushOneAtATime(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var calls, running, most int
	var sizes []int
	release := make(chan struct{})
	p := &parkedCommits{linger: time.Millisecond, run: func(jobs []*job) {
		mu.Lock()
		calls++
		running++
		most = max(most, running)
		sizes = append(sizes, len(jobs))
		first := calls == 1
		mu.Unlock()
		if first {
			<-release // the hung shard
		}
		mu.Lock()
		running--
		mu.Unlock()
		for _, j := range jobs {
			close(j.done)
		}
	}}
	newJob := func() *job { return &job{done: make(chan struct{})} }
	first := newJob()
	p.park(first)
	for started := false; !started; time.Sleep(time.Millisecond) {
		mu.Lock()
		started = calls == 1
		mu.Unlock()
	}
	const later = 20
	jobs := make([]*job, later)
	for i := range jobs {
		jobs[i] = newJob()
		p.park(jobs[i])
		time.Sleep(2 * time.Millisecond) // each past a linger
	}
	mu.Lock()
	if calls != 1 || most != 1 {
		t.Fatalf("%d flushes started (%d at once) while the first hung, want 1", calls, most)
	}
	mu.Unlock()
	close(release)
	<-first.done
	for _, j := range jobs {
		<-j.done
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 || most != 1 || sizes[1] != later {
		t.Fatalf("flushes %d of sizes %v, at most %d at once; want the %d parked meanwhile in one more", calls, sizes, most, later)
	}
}
