// Package fanout runs one call per item at once, for the per-shard steps of a
// grab: a grab waits for its slowest shard, not for the sum of them.
package fanout

import "sync"

// Each calls fn for every item, in parallel when there is more than one, and
// returns when all have returned.
func Each[T any](items []T, fn func(i int, item T)) {
	if len(items) == 1 {
		fn(0, items[0])
		return
	}
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i, it)
		}()
	}
	wg.Wait()
}
