package capacity

import (
	"fmt"
	"slices"
)

// GrowthPoint is one scaling run of the bench: grants spread evenly over
// Promotions promotions (each on a shard of its own) at Concurrency requests in
// flight, and what each GRANTED cost.
type GrowthPoint struct {
	Promotions  int     `json:"promotions"`
	Concurrency int     `json:"concurrency"`
	Granted     float64 `json:"grantedPerSecond"`
	// PerGrant is µs of CPU per GRANTED by process (other programs left out).
	PerGrant map[string]float64 `json:"perGrant"`
}

// Total is the point's µs of CPU per GRANTED, every process together.
func (g GrowthPoint) Total() float64 { return sum(g.PerGrant) }

// Growth is a point's CPU per GRANTED against two references: the point of one
// promotion at its concurrency (does spreading the same load over more shards
// cost more per answer?) and the point of its promotions at the highest
// concurrency measured (does a lighter load cost more per answer?).
type Growth struct {
	GrowthPoint
	VsOnePromotion  float64 // Total over the 1-promotion point's at this concurrency; 0: none measured
	VsTopConcurrent float64 // Total over the same promotions' at the highest concurrency; 0: none measured
}

// Grown relates every point to its references, sorted by concurrency then promotions.
func Grown(points []GrowthPoint) []Growth {
	top := map[int]GrowthPoint{} // by promotions: the point of highest concurrency
	one := map[int]GrowthPoint{} // by concurrency: the 1-promotion point
	for _, p := range points {
		if t, ok := top[p.Promotions]; !ok || p.Concurrency > t.Concurrency {
			top[p.Promotions] = p
		}
		if p.Promotions == 1 {
			one[p.Concurrency] = p
		}
	}
	out := make([]Growth, 0, len(points))
	for _, p := range points {
		g := Growth{GrowthPoint: p}
		if o, ok := one[p.Concurrency]; ok && o.Total() > 0 {
			g.VsOnePromotion = p.Total() / o.Total()
		}
		if t := top[p.Promotions]; t.Total() > 0 {
			g.VsTopConcurrent = p.Total() / t.Total()
		}
		out = append(out, g)
	}
	slices.SortStableFunc(out, func(a, b Growth) int {
		if a.Concurrency != b.Concurrency {
			return a.Concurrency - b.Concurrency
		}
		return a.Promotions - b.Promotions
	})
	return out
}

// Flat says whether every point's CPU per GRANTED is within Tolerance of its
// references (the model's assumption holds over the points), and if not, the
// point that strays the most.
func Flat(points []GrowthPoint) (bool, string) {
	flat, worst, why := true, 0.0, ""
	for _, g := range Grown(points) {
		for _, r := range []struct {
			v    float64
			than string
		}{{g.VsOnePromotion, "1 promotion"}, {g.VsTopConcurrent, "that of as many promotions at the highest concurrency"}} {
			if r.v == 0 {
				continue
			}
			if d := max(r.v, 1/r.v); d > 1+Tolerance && d > worst {
				flat, worst = false, d
				why = fmt.Sprintf("promotions %d, concurrency %d: %.0f µs per GRANTED, %.2f× %s", g.Promotions, g.Concurrency, g.Total(), r.v, r.than)
			}
		}
	}
	return flat, why
}

// WithHot is points with the feeding hot phase's own point (one promotion at
// m's concurrency) added when m is measured and the points lack one there.
func WithHot(points []GrowthPoint, m *Machine) []GrowthPoint {
	if m == nil || m.Concurrency < 1 || m.GrantCores <= 0 || sum(m.PerGrant) <= 0 {
		return points
	}
	for _, p := range points {
		if p.Promotions == 1 && p.Concurrency == m.Concurrency {
			return points
		}
	}
	hot := GrowthPoint{Promotions: 1, Concurrency: m.Concurrency, Granted: m.GrantCores * 1e6 / sum(m.PerGrant), PerGrant: m.PerGrant}
	return append(slices.Clone(points), hot)
}
