package grab

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/flashsale/platform/internal/shardmark"
)

// A shard whose Redis server restarted empty answers NOT_FOUND for everything
// until the fence's next poll fences it, and a false NOT_FOUND is definite to the
// checkout. So a NOT_FOUND is believed only from a shard that still holds its built
// marker (fence.go); otherwise the answer is UNAVAILABLE and the client retries
// (docs/design.md, "A shard that came back empty").

// shardLost reports whether shard is not whole (no built marker, or another
// server's: internal/shardmark), or cannot tell, so that a NOT_FOUND from it proves
// nothing. Without a fence every NOT_FOUND is believed.
func (s *shardGuard) shardLost(shard int) bool {
	if s.Fence == nil {
		return false
	}
	lost := s.markerReads[shard].lost(func() bool {
		ctx, cancel := s.settleCtx()
		defer cancel()
		st, err := shardmark.Read(ctx, s.Shards[shard], shard)
		return err != nil || st.Built != shardmark.Whole
	})
	if lost {
		s.Fence.refused.WithLabelValues(strconv.Itoa(shard), "lost").Inc()
	}
	return lost
}

// markerReads coalesces one shard's marker reads. A NOT_FOUND is judged only by a
// read that started after it came back (an earlier read may have seen the server
// before it restarted), and every NOT_FOUND that came back while a read was in
// flight shares the next read. A flood of grabs naming promotions that do not
// exist, each a key of its own and so never answered from the refusal cache, then
// costs the shard one marker read (with its INFO) a round trip, not one a grab.
type markerReads struct {
	mu   sync.Mutex
	busy bool        // a read is in flight
	next *markerRead // the read that starts when it ends, with its waiters
}

type markerRead struct {
	done    chan struct{}
	lost    bool
	waiters int // callers answered by it (under markerReads.mu)
}

// lost waits for a read of the shard that starts after the call, and answers it.
func (m *markerReads) lost(read func() bool) bool {
	m.mu.Lock()
	if m.next == nil {
		m.next = &markerRead{done: make(chan struct{})}
	}
	r := m.next
	r.waiters++
	if !m.busy {
		m.start(read)
	}
	m.mu.Unlock()
	<-r.done
	return r.lost
}

// start runs the next read; the one after it starts when it ends. m.mu is held.
// Every read of a shard is the same, so the next one reuses this read func.
func (m *markerReads) start(read func() bool) {
	r := m.next
	m.next, m.busy = nil, true
	go func() {
		r.lost = read()
		close(r.done)
		m.mu.Lock()
		defer m.mu.Unlock()
		m.busy = false
		if m.next != nil {
			m.start(read)
		}
	}()
}

func lostMessage(shard int) string {
	return fmt.Sprintf("shard %d lost its data and is not rebuilt yet; nothing was taken, retry shortly", shard)
}
