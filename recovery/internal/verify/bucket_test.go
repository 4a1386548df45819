package verify

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
)

// A bucket is held to the pins and ips whose home it is and to its share less its
// own net; a counter of another bucket's pin, or a pin missing from its home, is a
// drift named by the bucket's key.
func TestCompareBucketKeepsToItsHomes(t *testing.T) {
	t.Parallel()
	const k = 4
	l := bucket.LayoutOf(ring.Default, "C_verify-homes_1", k)
	counters := store.FlowCounters{Pins: map[string]int64{}, IPs: map[string]int64{"10.0.0.1": 3}, ByBucket: map[int]int64{1: 2, 2: 1}}
	for i := range 12 {
		counters.Pins[fmt.Sprintf("pin-%d", i)] = int64(1 + i%2)
	}
	shares := bucket.Shares(10, k)
	sides := make([]redisSide, k)
	for b := range sides {
		sides[b] = redisSide{hash: map[string]string{"remaining": strconv.FormatInt(shares[b]-counters.ByBucket[b], 10)},
			pins: map[string]string{}, ips: map[string]string{}}
	}
	for who, n := range counters.Pins {
		sides[bucket.Home(who, k)].pins[who] = strconv.FormatInt(n, 10)
	}
	for who, n := range counters.IPs {
		sides[bucket.Home(who, k)].ips[who] = strconv.FormatInt(n, 10)
	}
	for b := range k {
		if c := compareBucket(l, b, shares[b], sides[b], counters, nil); len(c.Drifts) != 0 || c.Key != l.Keys[b] || c.Shard != l.Shards[b] {
			t.Fatalf("bucket %d as the record says: %+v", b, c)
		}
	}

	// pin-0 counted on a bucket that is not its home, and missing from its home.
	home := bucket.Home("pin-0", k)
	other := (home + 1) % k
	sides[other].pins["pin-0"] = sides[home].pins["pin-0"]
	delete(sides[home].pins, "pin-0")
	for _, b := range []int{home, other} {
		c := compareBucket(l, b, shares[b], sides[b], counters, nil)
		if len(c.Drifts) != 1 || c.Drifts[0].Key != l.Keys[b] || c.Drifts[0].What != "pin" || c.Drifts[0].Who != "pin-0" {
			t.Errorf("bucket %d: drifts %+v; want pin-0 alone, named %s", b, c.Drifts, l.Keys[b])
		}
	}
}
