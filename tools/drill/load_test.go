package main

import (
	"testing"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/tools/checker"
)

// The checker compares the amounts clients were told (invariant 7): a GRANTED
// answer's amounts are the grant's, a RETURNED answer's what went back, and an
// answer that does not list a pool item leaves it untold.
func TestKeepAmountsKeepsWhatEachAnswerSaid(t *testing.T) {
	req := &checker.Request{Items: []checker.Item{{PromoID: "pool", Type: 1, Num: 2}, {PromoID: "plain", Type: 2, Num: 1}}}
	pool := promo.Key("pool", 1)
	keepAmounts(req, reply{result: "GRANTED", amounts: map[string]int64{pool: 730}})
	if req.Items[0].Amount != 730 || req.Items[1].Amount != 0 {
		t.Fatalf("after GRANTED: %+v", req.Items)
	}
	keepAmounts(req, reply{result: "RETURNED"})
	if req.Items[0].Returned != 0 {
		t.Fatalf("a RETURNED answer without the item set its amount: %+v", req.Items)
	}
	keepAmounts(req, reply{result: "RETURNED", amounts: map[string]int64{pool: 730}})
	if req.Items[0].Returned != 730 || req.Items[0].Amount != 730 {
		t.Fatalf("after RETURNED: %+v", req.Items)
	}
	keepAmounts(req, reply{result: "SOLD_OUT", amounts: map[string]int64{pool: 1}})
	if req.Items[0].Amount != 730 || req.Items[0].Returned != 730 {
		t.Fatalf("a refusal changed the amounts: %+v", req.Items)
	}
}
