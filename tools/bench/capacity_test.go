package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/tools/plan/capacity"
)

// A run's figures.json is what bin/plan reads: the hot phase's costs per GRANTED,
// the sold-out phase's per answer, the machine's cores, scenario 5's busiest shard.
func TestFiguresFileIsWhatPlanReads(t *testing.T) {
	res := sampleResults()
	res.TargetRuns.Hot = runOf(2*time.Second, map[string]int{"GRANTED": 10000},
		cpuUse{roleGrab: 1500 * time.Millisecond, roleRedis: 900 * time.Millisecond, roleLoad: 400 * time.Millisecond, roleOther: time.Second})
	res.TargetRuns.SoldOut = runOf(2*time.Second, map[string]int{"SOLD_OUT": 40000},
		cpuUse{roleGrab: 2 * time.Second, roleLoad: 1200 * time.Millisecond})
	res.Growth = []capacity.GrowthPoint{{Promotions: 1, Concurrency: 4, Granted: 900, PerGrant: map[string]float64{roleGrab: 300}}}
	dir := t.TempDir()
	if err := res.write(dir); err != nil {
		t.Fatal(err)
	}
	f, err := capacity.ReadFigures(filepath.Join(dir, figuresFile))
	if err != nil {
		t.Fatal(err)
	}
	// 1.5 s over 10,000 grants = 150 µs; 2 s over 40,000 answers = 50 µs; 0.9 s = 90 µs.
	if f.GrabPerGrant != 150 || f.GrabPerSoldOut != 50 || f.RedisPerGrant != 90 || f.BusiestShardPerGrant[16] != 20 || len(f.Growth) != 1 {
		t.Fatalf("figures %+v", f)
	}
	// Not measured in this run: the built-in figure, named.
	if f.KafkaPerEvent != capacity.Builtin.KafkaPerEvent || !strings.Contains(strings.Join(f.Builtin, ","), "kafkaPerEvent") {
		t.Fatalf("kafka %v, built-in %v", f.KafkaPerEvent, f.Builtin)
	}
	// The machine: other programs left out of the costs and the cores.
	m := f.Machine
	if m == nil || m.PerGrant[roleOther] != 0 || m.PerGrant[roleLoad] != 40 || m.GrantCores != 1.4 || m.SoldOutCores != 1.6 {
		t.Fatalf("machine %+v", m)
	}
}

func TestCheckTableHoldsTheLargeFiguresTo20Percent(t *testing.T) {
	res := &results{}
	p := capacity.Prediction{Rate: 10000, Total: 200, Cores: 2, PerAnswer: map[string]float64{roleGrab: 150, roleRedis: 45, roleKafka: 5}}
	o := capacity.Observe(7000, map[string]float64{roleGrab: 160, roleRedis: 70, roleKafka: 9})
	res.Check = []checkRow{{Mix: mixRun{SoldOut: 10, Grants: 1, Conc: 64}, Predicted: p, Flat: p, InFlight: 22, Measured: o, Rates: []float64{6800, 7000, 7300}, Result: "SOLD_OUT=10"}}
	md := res.capacityMarkdown()
	for _, want := range []string{
		"| 10 sold-out answers to 1 GRANTED at concurrency 64 (22 grants in flight) | answers/s (rounds 6,800–7,300) | 10,000 | 7,000 | +43% | **no** | 10,000 (+43%) |",
		"| grab-service, µs per answer | 150 | 160 | -6% | yes |",
		"| redis-server (all), µs per answer | 45 | 70 | -36% | **no** |",
		"| Kafka broker, µs per answer | 5.00 | 9.00 | -44% | — (under a tenth of the total) |",
		"largest miss by process: redis-server (all)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("check section lacks %q:\n%s", want, md)
		}
	}
	res.Check = []checkRow{{Missing: "not measured: x"}}
	if md := res.capacityMarkdown(); !strings.Contains(md, "not measured: x") {
		t.Fatal(md)
	}
}

func TestGrowthTableAndVerdict(t *testing.T) {
	res := &results{Growth: []capacity.GrowthPoint{
		{Promotions: 1, Concurrency: 16, Granted: 3000, PerGrant: map[string]float64{roleGrab: 150, roleRedis: 80}},
		{Promotions: 16, Concurrency: 16, Granted: 2500, PerGrant: map[string]float64{roleGrab: 190, roleRedis: 130}},
	}}
	md := res.capacityMarkdown()
	for _, want := range []string{"| 16 | 16 | 2,500 | 190 | 130 |", "| 320 | 1.39 |", "Not flat within 20%: promotions 16, concurrency 16"} {
		if !strings.Contains(md, want) {
			t.Errorf("growth section lacks %q:\n%s", want, md)
		}
	}
}
