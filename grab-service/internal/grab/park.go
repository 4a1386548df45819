package grab

import (
	"strings"
	"sync"
	"time"
)

// parkedCommits holds a shard's commits that found no take to ride, for at most
// the linger: a take of the same promotions arriving meanwhile carries them
// (unpark), else they go in one commit.lua call of their own when it ends (flush).
// A commit comes when Kafka acknowledges a batch of grabs, seldom beside a take
// of its shard, so without the wait most of a bucket shard's commits would cost a
// script call each (docs/benchmarks.md, "Commits wait for a take").
type parkedCommits struct {
	linger time.Duration
	run    func([]*job) // runs a pipeline of commits whose linger ended

	mu       sync.Mutex
	jobs     []*job
	timer    *time.Timer // armed while jobs is not empty and no flush runs
	flushing bool        // one flush at a time: a hung shard holds one pipeline, not one per linger
}

// park keeps j until a take carries it or the linger ends.
func (p *parkedCommits) park(j *job) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jobs = append(p.jobs, j)
	p.arm()
}

// arm starts the linger of what is parked, unless it runs already; p.mu is held.
func (p *parkedCommits) arm() {
	if p.timer == nil && !p.flushing && len(p.jobs) > 0 {
		p.timer = time.AfterFunc(p.linger, p.flush)
	}
}

// unpark adds to batch, up to room of them, the parked commits a take of batch
// can carry; the others stay parked.
func (p *parkedCommits) unpark(batch []*job, room int) []*job {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.jobs) == 0 {
		return batch
	}
	takes := map[string]bool{}
	for _, j := range batch {
		if j.take != nil {
			takes[takeKeys(j.take)] = true
		}
	}
	if len(takes) == 0 {
		return batch
	}
	kept := p.jobs[:0]
	for _, j := range p.jobs {
		if room > 0 && takes[strings.Join(j.commit.Keys, "\x00")] {
			batch = append(batch, j)
			room--
		} else {
			kept = append(kept, j)
		}
	}
	clear(p.jobs[len(kept):])
	p.jobs = kept
	if len(kept) == 0 && p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	return batch
}

// flush runs every parked commit now, in one pipeline; those parked while it
// runs get a linger of their own once it is done.
func (p *parkedCommits) flush() {
	p.mu.Lock()
	if p.flushing {
		p.mu.Unlock()
		return
	}
	jobs := p.jobs
	p.jobs = nil
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.flushing = true
	p.mu.Unlock()
	if len(jobs) > 0 {
		p.run(jobs)
	}
	p.mu.Lock()
	p.flushing = false
	p.arm()
	p.mu.Unlock()
}
