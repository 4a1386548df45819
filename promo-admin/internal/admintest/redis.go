package admintest

import (
	"testing"

	"github.com/flashsale/platform/internal/testenv"
)

// RedisServer is a redis-server of the test's own.
type RedisServer = testenv.RedisServer

// StartRedis starts a durable redis-server (an append-only file synced on every
// write), so that a kill and restart keeps what it acknowledged: the fault tests
// kill it between the MySQL and the Redis write. It is killed when the test ends.
func StartRedis(t testing.TB) *RedisServer { return testenv.StartRedis(t, testenv.Durable) }
