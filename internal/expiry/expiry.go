// Package expiry is a bounded concurrent map whose entries lapse a fixed time after
// they are put: the local caches of refusals and of status answers, which must not
// outlive their reason for long nor grow with what clients send. Both bounds hold
// without a read of the entry: at most Size entries, and lapsed ones dropped by the
// next Puts or by Sweep (docs/design.md, "Scripts and keys"). A map made WithStale
// keeps a lapsed entry that much longer for GetStale, the answer of last resort.
package expiry

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Map maps keys to values for its TTL after each Put, holding at most its size.
//
// It is the library's LRU in the order of Puts: a Get does not move an entry (it
// only peeks, under the read lock, so the hot readers never serialise). With one
// TTL for every entry the oldest entry is then also the first to lapse, which is
// what both eviction and reaping take: the entry with the least life left.
type Map[V any] struct {
	ttl   time.Duration
	stale time.Duration // how long past its time a lapsed entry stays for GetStale
	mu    sync.RWMutex
	lru   *simplelru.LRU[string, entry[V]]
}

type entry[V any] struct {
	v     V
	until time.Time
}

// reapPerPut is how many lapsed entries a Put drops besides adding its own: more
// than one, so lapsed entries go at least as fast as new ones come while Puts go on.
const reapPerPut = 2

// sweepChunk is how many entries Sweep drops under one hold of the lock, so that
// readers wait for microseconds, not for a whole sweep of a full map.
const sweepChunk = 256

// New returns a map of at most size entries, each lapsing ttl after its Put.
func New[V any](size int, ttl time.Duration) *Map[V] {
	l, err := simplelru.NewLRU[string, entry[V]](size, nil)
	if err != nil {
		panic(fmt.Sprintf("expiry.New(%d, %s): %v", size, ttl, err))
	}
	return &Map[V]{ttl: ttl, lru: l}
}

// WithStale keeps each lapsed entry for d more, for GetStale; it returns m.
func (m *Map[V]) WithStale(d time.Duration) *Map[V] {
	m.stale = d
	return m
}

// GetStale returns key's value while now is before its time plus the map's
// stale keep (WithStale): a lapsed answer, for when a fresh one cannot be had.
func (m *Map[V]) GetStale(key string, now time.Time) (V, bool) {
	return m.Get(key, now.Add(-m.stale))
}

// Get returns key's value while now is before its time.
func (m *Map[V]) Get(key string, now time.Time) (V, bool) {
	m.mu.RLock()
	e, ok := m.lru.Peek(key)
	m.mu.RUnlock()
	if !ok || !now.Before(e.until) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Put sets key to v until now plus the TTL, dropping the entry put longest ago
// when the map is full, and a few lapsed ones.
func (m *Map[V]) Put(key string, v V, now time.Time) {
	m.mu.Lock()
	m.lru.Add(key, entry[V]{v: v, until: now.Add(m.ttl)})
	m.reap(now, reapPerPut)
	m.mu.Unlock()
}

// Forget drops key's entry.
func (m *Map[V]) Forget(key string) {
	m.mu.Lock()
	m.lru.Remove(key)
	m.mu.Unlock()
}

// Sweep drops every entry lapsed by now (past its stale keep) and reports how
// many it dropped.
func (m *Map[V]) Sweep(now time.Time) int {
	total := 0
	for {
		m.mu.Lock()
		n := m.reap(now, sweepChunk)
		m.mu.Unlock()
		total += n
		if n < sweepChunk {
			return total
		}
	}
}

// reap drops up to most lapsed entries from the oldest end, stopping at the first
// one still live (under the write lock).
func (m *Map[V]) reap(now time.Time, most int) int {
	for n := range most {
		_, e, ok := m.lru.GetOldest()
		if !ok || now.Before(e.until.Add(m.stale)) {
			return n
		}
		m.lru.RemoveOldest()
	}
	return most
}

// Len is the number of entries held, lapsed ones not yet dropped included.
func (m *Map[V]) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.lru.Len()
}
