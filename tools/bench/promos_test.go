package main

import (
	"testing"

	"github.com/flashsale/platform/client"
)

// The bench's extra create fields land in the client's spec by their JSON names;
// a name the spec does not have is refused, not dropped.
func TestWithFieldsSetsTheSpecsFields(t *testing.T) {
	spec, err := withFields(client.PromotionSpec{PromoID: "b", Total: 9}, map[string]any{"perPinLimit": int64(2), "perIpLimit": 3})
	if err != nil || spec.PerPinLimit != 2 || spec.PerIPLimit != 3 || spec.PromoID != "b" || spec.Total != 9 {
		t.Fatalf("withFields: %+v %v", spec, err)
	}
	if _, err := withFields(client.PromotionSpec{}, map[string]any{"perPin": 2}); err == nil {
		t.Fatal("an unknown field was taken")
	}
}
