package client

import (
	"fmt"
	"testing"
)

// The contract's test vectors (docs/CONTRACT.md, "Shard ring").
func TestShardHoldsTheContractVectors(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]int{"C_A_1": 14, "C_100001_1": 10, "C_sku-42_1": 10, "C_B_2": 2,
		"C_promo-2026-11-11_1": 8, "C_X9_99": 7} {
		if got := Shard(key); got != want {
			t.Errorf("Shard(%q) = %d, want %d", key, got, want)
		}
	}
}

// A derived requestId's index entry lives on its promotion's shard, the suffix is
// the shortest that does it, and deriving again changes nothing.
func TestRequestIDBesideIsBesideAndShortest(t *testing.T) {
	t.Parallel()
	for i := 0; i < 500; i++ {
		base, promoID, typ := fmt.Sprintf("order-%d", i), fmt.Sprintf("sale-%d", i%37), 1+i%3
		rid := RequestIDBeside(base, promoID, typ)
		want := Shard(PromotionKey(promoID, typ))
		if Shard("R_"+rid) != want {
			t.Fatalf("RequestIDBeside(%q, %q, %d) = %q on shard %d, want %d", base, promoID, typ, rid, Shard("R_"+rid), want)
		}
		if rid != base {
			var k int
			if _, err := fmt.Sscanf(rid[len(base):], ".%d", &k); err != nil {
				t.Fatalf("%q is not %q with a suffix .k: %v", rid, base, err)
			}
			for j := -1; j < k; j++ {
				shorter := base
				if j >= 0 {
					shorter = fmt.Sprintf("%s.%d", base, j)
				}
				if Shard("R_"+shorter) == want {
					t.Fatalf("%q is beside too, and comes before %q", shorter, rid)
				}
			}
		}
		if again := RequestIDBeside(rid, promoID, typ); again != rid {
			t.Fatalf("deriving %q again gave %q", rid, again)
		}
	}
}

func TestWithRequestIDBesideDerivesFromTheFirstItem(t *testing.T) {
	t.Parallel()
	r := GrabRequest{RequestID: "order-7", Items: []Item{{PromoID: "sale-1", Type: 1, Num: 1}, {PromoID: "other", Type: 2, Num: 1}}}
	if got, want := r.WithRequestIDBeside().RequestID, RequestIDBeside("order-7", "sale-1", 1); got != want {
		t.Fatalf("WithRequestIDBeside: %q, want %q", got, want)
	}
	if r.RequestID != "order-7" {
		t.Fatalf("WithRequestIDBeside changed its receiver: %q", r.RequestID)
	}
	if got := (GrabRequest{RequestID: "x"}).WithRequestIDBeside().RequestID; got != "x" {
		t.Fatalf("a grab without items got requestId %q", got)
	}
}
