package adminservice_test

import (
	"reflect"
	"testing"

	"github.com/flashsale/platform/promo-admin/internal/adminservice"
)

// With approval on, a PATCH that changes nothing approval guards answers the
// promotion unchanged and writes nothing (propose.go), which is right only while
// every field a patch can change is guarded: a new field must be added to
// sameGuarded, or given a path that applies it alone, before this list.
func TestEveryPatchFieldIsGuarded(t *testing.T) {
	guarded := map[string]bool{"Total": true, "PerPinLimit": true, "PerIPLimit": true, "RateLimit": true, "EndAt": true,
		"Channels": true, "Buckets": true /* fixed at create: only the promotion's own count is accepted */}
	for _, f := range reflect.VisibleFields(reflect.TypeOf(adminservice.Patch{})) {
		if !guarded[f.Name] {
			t.Errorf("Patch.%s is not known to approval: guard it (sameGuarded) or apply it on its own", f.Name)
		}
	}
}
