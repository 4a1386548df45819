package grabtransport_test

import (
	"os"
	"testing"

	"github.com/flashsale/platform/internal/apitest"
)

// TestMain fails the package when an operation of grab-service in api/openapi.yaml
// was exercised by none of its tests (every test's server checks its exchanges
// against the spec: env_test.go).
func TestMain(m *testing.M) {
	os.Exit(apitest.Main(m, apitest.GrabService, nil))
}
