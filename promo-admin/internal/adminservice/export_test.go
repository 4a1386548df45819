package adminservice

import "github.com/flashsale/platform/internal/fault"

// SetFaults installs the fault points of the consistency tests: between runs after
// the MySQL write and before the Redis write of a change, afterRedis after the
// Redis write and before the change is promoted in MySQL. nil clears a point.
func SetFaults(a *Admin, between, afterRedis func()) {
	h := fault.Hook(func(point string) error {
		switch {
		case point == "between-writes" && between != nil:
			between()
		case point == "after-redis" && afterRedis != nil:
			afterRedis()
		}
		return nil
	})
	a.faults.hook.Store(&h)
}
