package capacity

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*max(1, math.Abs(b)) }

// A mix's CPU per answer is each process's two costs weighted by the mix, and its
// rate the cores over that CPU: worked by hand.
func TestPredictWeighsTheMix(t *testing.T) {
	m := Machine{Concurrency: 64,
		PerGrant:   map[string]float64{"grab": 150, "redis": 90, "load": 40}, // 280 µs
		PerSoldOut: map[string]float64{"grab": 50, "load": 30},               // 80 µs
		GrantCores: 1.8, SoldOutCores: 1.6}
	p, err := m.Predict(0.9, 64, nil)
	if err != nil {
		t.Fatal(err)
	}
	// grab 0.1*150+0.9*50 = 60; redis 9; load 0.1*40+0.9*30 = 31; total 100 µs.
	if !near(p.PerAnswer["grab"], 60) || !near(p.PerAnswer["redis"], 9) || !near(p.PerAnswer["load"], 31) || !near(p.Total, 100) {
		t.Fatalf("per answer %v, total %v", p.PerAnswer, p.Total)
	}
	// Time weights: grants 0.1*280 = 28, sold-out 0.9*80 = 72: cores 0.28*1.8+0.72*1.6 = 1.656.
	if !near(p.Cores, 1.656) || !near(p.Rate, 16560) {
		t.Fatalf("cores %v rate %v, want 1.656 and 16,560", p.Cores, p.Rate)
	}
	// The feeding runs themselves are predicted exactly.
	if g, _ := m.Predict(0, 64, nil); !near(g.Rate, 1.8e6/280) {
		t.Fatalf("all grants: %v", g.Rate)
	}
}

func TestPredictRefusesWhatItCannotKnow(t *testing.T) {
	m := Machine{Concurrency: 64, PerGrant: map[string]float64{"grab": 150}, GrantCores: 1.8}
	for _, s := range []float64{-0.1, 1.1, math.NaN(), 0.5} { // 0.5: no sold-out cost measured
		if _, err := m.Predict(s, 64, nil); err == nil {
			t.Errorf("share %v: no error", s)
		}
	}
	if _, err := m.Predict(0, 0, nil); err == nil {
		t.Error("concurrency 0: no error")
	}
	if _, err := m.Predict(0, 64, nil); err != nil {
		t.Fatal(err)
	}
}

// A GRANTED costs what the scaling runs measured at the mix's grants in flight:
// Little's law with the feeding runs' latencies, then log-linear between the two
// nearest concurrencies of one promotion, flat beyond them.
func TestPredictReadsTheGrantCostAtItsGrantsInFlight(t *testing.T) {
	// Hot phase: 64 in flight, 200 µs per GRANTED on 1.6 cores = 8,000/s, 8 ms each.
	// Sold-out: 40 µs on 1.6 cores = 40,000/s, 1.6 ms each.
	m := Machine{Concurrency: 64, PerGrant: map[string]float64{"grab": 120, "redis": 80}, PerSoldOut: map[string]float64{"grab": 40},
		GrantCores: 1.6, SoldOutCores: 1.6}
	// 1:1 at 36 in flight: grants hold 8/(8+1.6) of the slots, 30 of them.
	if g := m.GrantsInFlight(0.5, 36); !near(g, 30) {
		t.Fatalf("grants in flight %v, want 30", g)
	}
	curve := []GrowthPoint{
		{Promotions: 1, Concurrency: 16, PerGrant: map[string]float64{"grab": 240, "redis": 80}},
		{Promotions: 1, Concurrency: 4, PerGrant: map[string]float64{"grab": 600, "redis": 200}},
		{Promotions: 16, Concurrency: 32, PerGrant: map[string]float64{"grab": 9999}}, // not one promotion: not read
	}
	// 1:1 at 38.4 in flight: 32 grants, halfway between 16 and 64 in log:
	// grab sqrt(240 x 120); redis 80 at both ends.
	if g := m.GrantsInFlight(0.5, 38); g > 32 || g < 31 {
		t.Fatalf("grants in flight %v", g)
	}
	p, err := m.Predict(0.5, 38, curve)
	if err != nil {
		t.Fatal(err)
	}
	g := m.GrantsInFlight(0.5, 38)
	tt := math.Log(g/16) / math.Log(4)
	grab := math.Exp((1-tt)*math.Log(240) + tt*math.Log(120))
	if g32, _ := m.Predict(0, 32, curve); !near(g32.PerAnswer["grab"], math.Sqrt(240*120)) || !near(g32.PerAnswer["redis"], 80) {
		t.Fatalf("32 in flight: %v", g32.PerAnswer)
	}
	if !near(p.PerAnswer["grab"], 0.5*grab+0.5*40) || !near(p.PerAnswer["redis"], 0.5*80) {
		t.Fatalf("at %.1f grants in flight: %v, want grab %.1f", g, p.PerAnswer, 0.5*grab+0.5*40)
	}
	// Beyond the points: the nearest one's cost. Without a curve: the hot phase's.
	if p, _ := m.Predict(0, 2, curve); !near(p.PerAnswer["grab"], 600) {
		t.Fatalf("2 in flight: %v", p.PerAnswer)
	}
	if p, _ := m.Predict(0, 512, curve); !near(p.PerAnswer["grab"], 120) {
		t.Fatalf("512 in flight: %v", p.PerAnswer)
	}
	if p, _ := m.Predict(0, 2, nil); !near(p.PerAnswer["grab"], 120) {
		t.Fatalf("no curve: %v", p.PerAnswer)
	}
}

// The miss splits into the cores the stack got and its CPU per answer, and names
// the process that missed by the most.
func TestExplainSplitsTheMiss(t *testing.T) {
	p := Prediction{Rate: 10000, Total: 200, Cores: 2, PerAnswer: map[string]float64{"grab": 120, "redis": 80}}
	o := Observe(7500, map[string]float64{"grab": 125, "redis": 115}) // 240 µs on 1.8 cores
	m := Explain(p, o)
	if !near(m.Rate, 0.75) || !near(m.Cores, 0.9) || !near(m.CPU, 200.0/240) || m.Process != "redis" || m.Measured != 115 {
		t.Fatalf("%+v", m)
	}
	if !near(m.Rate, m.Cores*m.CPU) {
		t.Fatalf("the factors %v × %v do not make the miss %v", m.Cores, m.CPU, m.Rate)
	}
	if !strings.Contains(m.String(), "redis") {
		t.Fatal(m.String())
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		p, m float64
		want bool
	}{{100, 100, true}, {120, 100, true}, {121, 100, false}, {80, 100, true}, {79, 100, false}, {1, 0, false}, {math.NaN(), 1, false}} {
		if Within(c.p, c.m) != c.want {
			t.Errorf("Within(%v, %v) = %v", c.p, c.m, !c.want)
		}
	}
}

// A bench run's file plans with its own costs and names those it lacks; a cost
// no machine has is refused.
func TestFiguresRoundTripOverBuiltin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "figures.json")
	f := Figures{Source: "test run", GrabPerGrant: 120, GrabPerSoldOut: 40, BusiestShardPerGrant: map[int]float64{1: 80},
		Machine: &Machine{Concurrency: 64, PerGrant: map[string]float64{"grab": 120}, GrantCores: 1.9},
		Growth:  []GrowthPoint{{Promotions: 1, Concurrency: 16, Granted: 3000, PerGrant: map[string]float64{"grab": 130}}}}
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	g, err := ReadFigures(path)
	if err != nil {
		t.Fatal(err)
	}
	if g.GrabPerGrant != 120 || g.RedisPerGrant != Builtin.RedisPerGrant || len(g.BusiestShardPerGrant) != 1 ||
		g.Machine == nil || g.Machine.GrantCores != 1.9 || len(g.Growth) != 1 || g.Growth[0].Total() != 130 {
		t.Fatalf("read back %+v", g)
	}
	if !slices.Contains(g.Builtin, "redisPerGrant") || slices.Contains(g.Builtin, "grabPerGrant") {
		t.Fatalf("built-in figures named: %v", g.Builtin)
	}
	if len(Builtin.BusiestShardPerGrant) != 5 {
		t.Fatal("reading a file changed the built-in figures")
	}
	for _, doc := range []string{`{"grabPerGrant": -1}`, `{"busiestShardPerGrant": {"0": 5}}`, `{"nonsense": 1}`, `[1]`} {
		if _, err := ParseFigures([]byte(doc)); err == nil {
			t.Errorf("%s: no error", doc)
		}
	}
	f.GrabPerGrant = math.NaN()
	if err := f.WriteFile(path); err == nil {
		t.Fatal("a NaN cost was written")
	}
}

func TestGrowthAgainstItsReferences(t *testing.T) {
	pts := []GrowthPoint{
		{Promotions: 1, Concurrency: 16, PerGrant: map[string]float64{"a": 200}},
		{Promotions: 16, Concurrency: 16, PerGrant: map[string]float64{"a": 230}},
		{Promotions: 1, Concurrency: 1, PerGrant: map[string]float64{"a": 400}},
		{Promotions: 16, Concurrency: 1, PerGrant: map[string]float64{"a": 420}},
	}
	g := Grown(pts)
	if g[0].Concurrency != 1 || g[0].Promotions != 1 || !near(g[1].VsOnePromotion, 420.0/400) || !near(g[0].VsTopConcurrent, 2) {
		t.Fatalf("%+v", g)
	}
	flat, why := Flat(pts)
	if flat || !strings.Contains(why, "concurrency 1:") {
		t.Fatalf("flat %v: %s", flat, why)
	}
	if flat, why := Flat(pts[:2]); !flat {
		t.Fatalf("1.15× called not flat: %s", why)
	}
}

// The hot phase stands in the growth table as 1 promotion at its concurrency,
// unless the scaling runs measured that point themselves.
func TestWithHotAddsTheFeedingPoint(t *testing.T) {
	m := &Machine{Concurrency: 64, PerGrant: map[string]float64{"a": 200}, GrantCores: 1.6}
	pts := []GrowthPoint{{Promotions: 1, Concurrency: 16, PerGrant: map[string]float64{"a": 300}}}
	got := WithHot(pts, m)
	if len(got) != 2 || got[1].Concurrency != 64 || !near(got[1].Granted, 8000) || len(pts) != 1 {
		t.Fatalf("%+v", got)
	}
	if len(WithHot(got, m)) != 2 || len(WithHot(pts, nil)) != 1 {
		t.Fatal("the hot point was added twice, or without a machine")
	}
}
