package adminservice

// SetFaults installs the fault points of the consistency tests: between runs after
// the MySQL write and before the Redis write of a change, afterRedis after the
// Redis write and before the change is promoted in MySQL. nil clears a point.
func SetFaults(a *Admin, between, afterRedis func()) {
	a.faults.betweenWrites.Store(&between)
	a.faults.afterRedis.Store(&afterRedis)
}
