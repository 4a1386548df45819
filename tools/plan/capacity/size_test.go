package capacity

import (
	"math"
	"strings"
	"testing"
)

func fleet() Fleet {
	return Fleet{GrabCores: 4, SinkCores: 2, KafkaCores: 8, MySQLCores: 32, Utilization: 0.6, Shards: 16, MaxBuckets: 16}
}

func line(t *testing.T, p Plan, resource string) Line {
	t.Helper()
	for _, l := range p.Lines {
		if l.Resource == resource {
			return l
		}
	}
	t.Fatalf("no line %q in %+v", resource, p)
	return Line{}
}

// The grab-service line is the load's CPU over the instances' cores, rounded up
// to whole instances at the utilization: worked by hand for this load.
func TestGrabServiceInstances(t *testing.T) {
	f := Builtin
	p := Size(f, fleet(), Load{SoldOut: 100_000, Grants: 10_000})
	// 100,000 x 51 µs + 10,000 x 149 µs = 6.59 cores; at 60% of 4 cores: 2.75 -> 3.
	l := line(t, p, "grab-service")
	if !strings.HasPrefix(l.Need, "3 instances") || math.Abs(l.Busy-6.59/12) > 1e-9 {
		t.Fatalf("grab-service: %+v, want 3 instances at %.3f busy", l, 6.59/12)
	}
}

// The hot promotion gets the fewest buckets that keep its busiest shard under the
// utilization, and more only when fewer would not do.
func TestHotPromotionBuckets(t *testing.T) {
	f := Builtin
	for _, c := range []struct {
		grants float64
		want   string
	}{
		{5_000, "1 buckets"},   // 5,000 x 96.7 µs = 0.48 core
		{8_000, "2 buckets"},   // 0.77 at 1; 8,000 x 64.4 = 0.52 at 2
		{14_000, "16 buckets"}, // 0.69 at 8 (49.5), 0.57 at 16 (41.0)
	} {
		l := line(t, Size(f, fleet(), Load{Grants: c.grants, HotShare: 1}), "hot promotion's busiest shard")
		if !strings.HasPrefix(l.Need, c.want) || l.Busy > 0.6 {
			t.Errorf("%.0f grants/s: %+v, want %s under 60%%", c.grants, l, c.want)
		}
	}
	over := line(t, Size(f, fleet(), Load{Grants: 50_000, HotShare: 1}), "hot promotion's busiest shard")
	if !strings.HasPrefix(over.Need, "16 buckets") || over.Busy < 1 || !strings.Contains(over.Note, "past its headroom") {
		t.Fatalf("50,000 grants/s of one promotion: %+v, want 16 buckets over one core, said", over)
	}
	// Cores three times faster carry three times the grants at the same bucket count.
	f.Speedup = 3
	fast := line(t, Size(f, fleet(), Load{Grants: 3 * 14_000, HotShare: 1}), "hot promotion's busiest shard")
	if !strings.HasPrefix(fast.Need, "16 buckets") || fast.Busy > 0.6 {
		t.Fatalf("3x cores: %+v", fast)
	}
}

// The bound is the busiest resource: here MySQL, given one core.
func TestBoundIsTheBusiestResource(t *testing.T) {
	fl := fleet()
	fl.MySQLCores = 1
	p := Size(Builtin, fl, Load{SoldOut: 10_000, Grants: 30_000, HotShare: 0.01})
	if p.Bound != "MySQL" {
		t.Fatalf("bound %q, want MySQL: %+v", p.Bound, p.Lines)
	}
}
