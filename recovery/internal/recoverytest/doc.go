// Package recoverytest is what the recovery tests share: real servers started per
// test (a redis-server, a MariaDB server, an in-process Kafka), the local stack's
// shards with one of them swapped for the test's own, promotions created as
// promo-admin creates them, and a sale driven through the real Lua scripts and the
// same publish-then-commit protocol as grab-service. Only tests import it.
package recoverytest

import "os"

// envLog turns on the components' logs in verbose test runs.
var envLog = os.Getenv("RECOVERY_TEST_LOG") == "1"
