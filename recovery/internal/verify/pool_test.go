package verify

import (
	"strings"
	"testing"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
)

// An envelope pool holds as remaining the number of its envelopes left, which is
// what the rebuild writes and q.lua takes from, not the flow log's unit net (here
// part 0 is held by two GRAB rows: 2 units out, 1 envelope); and its hash carries
// the split's digest, compared with the record's.
func TestComparePoolHoldsEnvelopesLeftAndTheSplitsDigest(t *testing.T) {
	t.Parallel()
	l := bucket.LayoutOf(ring.Default, "C_verify-pool_1", 1)
	split := store.EnvelopeSplit{Amount: 100, Parts: []int64{10, 20, 30, 40}}
	pool := store.NewEnvelopePool(split)
	pool.Hold([]int{0})
	pool.Hold([]int{0})
	counters := store.FlowCounters{Pins: map[string]int64{"pin": 2}, IPs: map[string]int64{"10.0.0.1": 2}, ByBucket: map[int]int64{0: 2}}
	side := redisSide{
		hash: map[string]string{"remaining": "3", "envAmount": "100", "envLeft": "90", "envDigest": lua.EnvelopeDigest(split.Parts)},
		pins: map[string]string{"pin": "2"}, ips: map[string]string{"10.0.0.1": "2"},
		envelopes: []string{lua.EnvelopeMember(1, 20), lua.EnvelopeMember(2, 30), lua.EnvelopeMember(3, 40)},
	}
	if c := compareBucket(l, 0, 4, side, counters, &pool); len(c.Drifts) != 0 {
		t.Fatalf("a pool as the record says: drifts %+v", c.Drifts)
	}

	side.hash["remaining"] = "2"
	c := compareBucket(l, 0, 4, side, counters, &pool)
	if len(c.Drifts) != 1 || c.Drifts[0].What != "remaining" || c.Drifts[0].Redis != 2 || c.Drifts[0].Record != 3 {
		t.Fatalf("remaining 2 of 3 envelopes left: drifts %+v; want remaining redis=2 record=3", c.Drifts)
	}
	side.hash["remaining"] = "3"

	for _, digest := range []string{lua.EnvelopeDigest([]int64{40, 30, 20, 10}), ""} {
		side.hash["envDigest"] = digest
		c := compareBucket(l, 0, 4, side, counters, &pool)
		if len(c.Drifts) != 1 || c.Drifts[0].What != "envDigest" {
			t.Fatalf("envDigest %q: drifts %+v; want envDigest alone", digest, c.Drifts)
		}
		if s := c.Drifts[0].String(); !strings.Contains(s, "envDigest") || !strings.Contains(s, lua.EnvelopeDigest(split.Parts)) {
			t.Errorf("the drift reads %q", s)
		}
	}
}
