package app_test

import (
	"os"
	"testing"

	"github.com/flashsale/platform/internal/apitest"
)

// TestMain fails the package when an operation of promo-admin in api/openapi.yaml
// was exercised by none of its tests (every test's server checks its exchanges
// against the spec: admintest.Start).
func TestMain(m *testing.M) {
	os.Exit(apitest.Main(m, apitest.PromoAdmin, nil))
}
