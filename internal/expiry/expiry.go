// Package expiry is a concurrent map whose entries lapse at a given time: the local
// caches of refusals (sold out, stopped, ...) that must never outlive their reason
// for long, since stock can come back through another instance.
package expiry

import (
	"sync"
	"time"
)

// Map maps keys to values until each entry's own time; the zero Map is ready.
type Map[V any] struct{ m sync.Map } // key -> entry[V]

type entry[V any] struct {
	v     V
	until time.Time
}

// Get returns key's value while now is before its time; a lapsed entry is dropped.
func (c *Map[V]) Get(key string, now time.Time) (V, bool) {
	var zero V
	raw, ok := c.m.Load(key)
	if !ok {
		return zero, false
	}
	e := raw.(entry[V])
	if !now.Before(e.until) {
		c.m.CompareAndDelete(key, raw)
		return zero, false
	}
	return e.v, true
}

// Put sets key to v until the given time.
func (c *Map[V]) Put(key string, v V, until time.Time) { c.m.Store(key, entry[V]{v: v, until: until}) }

// Forget drops key's entry.
func (c *Map[V]) Forget(key string) { c.m.Delete(key) }
