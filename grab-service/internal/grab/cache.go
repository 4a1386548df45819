package grab

import (
	"sync"
	"time"
)

// refusalCache is the sold-out short-circuit (the Alibaba and 12306 idea): once a
// promotion is known SOLD_OUT, STOPPED, ENDED or NOT_FOUND, grabs for it are answered
// here without Redis. Entries expire after RefusalTTL, which bounds how long a
// SOLD_OUT stays stale after a cancel on another instance returns stock. Only a
// script's answer sets an entry, never an error, so one failure cannot refuse everyone.
type refusalCache struct{ m sync.Map } // promotion key -> cachedRefusal

type cachedRefusal struct {
	outcome Outcome
	until   time.Time
}

func cacheable(o Outcome) bool {
	return o == SoldOut || o == Stopped || o == Ended || o == NotFound
}

func (c *refusalCache) get(key string, now time.Time) (Outcome, bool) {
	v, ok := c.m.Load(key)
	if !ok {
		return "", false
	}
	r := v.(cachedRefusal)
	if !now.Before(r.until) {
		c.m.CompareAndDelete(key, v)
		return "", false
	}
	return r.outcome, true
}

func (c *refusalCache) put(key string, o Outcome, until time.Time) {
	c.m.Store(key, cachedRefusal{outcome: o, until: until})
}

// forget drops key's entry: stock came back through this instance.
func (c *refusalCache) forget(key string) { c.m.Delete(key) }
