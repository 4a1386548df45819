package main

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/tools/loadgen"
)

func TestGrabBodyIsTheContractsGrabRequest(t *testing.T) {
	var req struct {
		RequestID string `json:"requestId"`
		Pin       string `json:"pin"`
		IP        string `json:"ip"`
		Items     []struct {
			PromoID string `json:"promoId"`
			Type    int    `json:"type"`
			Num     int64  `json:"num"`
		} `json:"items"`
	}
	dec := json.NewDecoder(strings.NewReader(string(grabBody("b1", "sale-1", 123456, false))))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		t.Fatal(err)
	}
	// The requestId is derived beside the promotion (docs/CONTRACT.md).
	if req.RequestID != promo.RequestIDBeside("b1-123456", promo.Key("sale-1", 1)) ||
		ring.Default.Shard(promo.RequestIndexKey(req.RequestID)) != ring.Default.Shard(promo.Key("sale-1", 1)) || req.Pin != "p23456" || req.IP != "198.18.243.207" ||
		len(req.Items) != 1 || req.Items[0].PromoID != "sale-1" || req.Items[0].Type != 1 || req.Items[0].Num != 1 {
		t.Fatalf("have %+v", req)
	}
}

// The hot phase's second way sends requestIds as they come: the run's own name,
// not derived beside the promotion, so most claims land on another shard.
func TestRandomRequestIDsAreSentAsTheyCome(t *testing.T) {
	var req struct {
		RequestID string `json:"requestId"`
	}
	if err := json.Unmarshal(grabCallIDs("tok", "b1", "sale-1", 7, true).Body.([]byte), &req); err != nil {
		t.Fatal(err)
	}
	if req.RequestID != "b1-7" {
		t.Fatalf("random requestId %q, want b1-7", req.RequestID)
	}
	if err := json.Unmarshal(grabCallIDs("tok", "b1", "sale-1", 7, false).Body.([]byte), &req); err != nil {
		t.Fatal(err)
	}
	if req.RequestID != promo.RequestIDBeside("b1-7", promo.Key("sale-1", 1)) {
		t.Fatalf("derived requestId %q", req.RequestID)
	}
	elsewhere := 0
	for n := range int64(64) {
		rid := fmt.Sprintf("b1-%d", n)
		if ring.Default.Shard(promo.RequestIndexKey(rid)) != ring.Default.Shard(promo.Key("sale-1", 1)) {
			elsewhere++
		}
	}
	if elsewhere < 32 {
		t.Fatalf("only %d of 64 random requestIds have their index entry off the promotion's shard", elsewhere)
	}
}

func TestIdsOnShardsPlacesEachIDOnAWantedShard(t *testing.T) {
	ids := idsOnShards("x", []int{0, 5, 15}, 2)
	if len(ids) != 6 {
		t.Fatalf("want 6 ids, have %v", ids)
	}
	count := map[int]int{}
	for _, id := range ids {
		count[shardOf(id)]++
	}
	for _, s := range []int{0, 5, 15} {
		if count[s] != 2 {
			t.Fatalf("shard %d holds %d ids, want 2 (%v)", s, count[s], count)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	for hp, want := range map[string]bool{"127.0.0.1:7001": true, "localhost:1": true, "[::1]:80": true,
		"10.0.0.1:6379": false, "192.168.1.5:3306": false, "example.com:80": false} {
		if have := isLoopback(hp); have != want {
			t.Errorf("isLoopback(%q) = %v, want %v", hp, have, want)
		}
	}
}

func TestPerSecondCountsOnlyTheResultsAsked(t *testing.T) {
	s := loadgen.Summarize([]loadgen.Answer{{Result: "GRANTED"}, {Result: "GRANTED"}, {Result: "SOLD_OUT"}, {Result: "UNAVAILABLE"}}, 2*time.Second)
	if have := perSecond(s, "GRANTED"); have != 1 {
		t.Errorf("GRANTED/s = %v, want 1", have)
	}
	if have := perSecond(s); have != 2 {
		t.Errorf("answers/s = %v, want 2", have)
	}
}

func TestRatioRowVerdicts(t *testing.T) {
	for _, c := range []struct {
		r    ratioRow
		want bool
	}{
		{ratioRow{Ours: 10, Base: 5, Target: 2}, true},
		{ratioRow{Ours: 9, Base: 5, Target: 2}, false},
		{ratioRow{Ours: 4, Base: 1, Target: 5, AtMost: true}, true},
		{ratioRow{Ours: 6, Base: 1, Target: 5, AtMost: true}, false},
		{ratioRow{Ours: 6, Base: 0, Target: 1}, false},
		{ratioRow{Missing: "not measured", Target: 1}, false},
	} {
		if have := c.r.met(); have != c.want {
			t.Errorf("%+v met = %v, want %v", c.r, have, c.want)
		}
	}
}

func TestNum(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", -4321: "-4,321", math.NaN(): "n/a"} {
		if have := num(v); have != want {
			t.Errorf("num(%v) = %q, want %q", v, have, want)
		}
	}
}

func sampleResults() *results {
	res := &results{Started: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), Conc: 64, Duration: 2 * time.Second,
		Command: "make bench", Machine: machine{Cores: 2, CPU: "test", Go: "go1.26", Redis: "7.0", MySQL: "10.11"}}
	res.Finished = res.Started.Add(4 * time.Minute)
	res.add(ratioRow{N: 1, Scenario: "hot", Ours: 2000, OursUnit: "GRANTED/s", Base: 8000, BaseUnit: "EVALSHA/s", Target: 1})
	res.add(ratioRow{N: 6, Scenario: "recovery", Target: 0.5, Missing: "recovery: not available (x)"})
	for _, c := range []int{1, 2, 4, 64} {
		res.Spread = append(res.Spread, spreadRow{Conc: c, One: figures{Granted: float64(100 * c), P50: 1, P99: 3},
			Many: figures{Granted: float64(120 * c), P50: 0.8, P99: 2.5}})
	}
	res.Latency = &latencyRow{Peak: 2000, Target: 1000, Achieved: 990, F: figures{P50: 2, P99: 8, P999: 12}}
	res.Buckets = []bucketRow{
		{K: 1, F: figures{Granted: 8000}, Busiest: shardLoad{Calls: 2, CPUus: 60}, SellOut: "1000 granted of 1000", SellOutPass: true},
		{K: 16, F: figures{Granted: 4000}, Busiest: shardLoad{Calls: 0.25, CPUus: 20}, SellOut: "1000 granted of 1000", SellOutPass: true},
	}
	return res
}

func TestBucketTableAndItsSellOutVerdict(t *testing.T) {
	res := sampleResults()
	md := res.markdown()
	for _, want := range []string{"#### 5. A hot promotion beyond one shard", "| 16 | 4,000 |", "0.250", "8.00", "3.00", "0.50"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if !res.invariantsPass() {
		t.Fatal("passing sell-out checks fail the run")
	}
	res.Buckets[1].SellOutPass = false
	if res.invariantsPass() {
		t.Fatal("a failed bucket sell-out check does not fail the run")
	}
}

func TestMarkdownHasEveryScenarioAndTheMachine(t *testing.T) {
	md := sampleResults().markdown()
	for _, want := range []string{"| 1 | hot |", "0.25", "**no**", "recovery: not available (x)", "| 4 | spread at c=64",
		"| 7 | latency at half of peak", "≤ 5", "2 cores", "share these 2 cores", "xychart-beta", "make bench"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestChartIsWellFormedSVG(t *testing.T) {
	svg := sampleResults().chart()
	dec := xml.NewDecoder(strings.NewReader(svg))
	for {
		_, err := dec.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("chart is not well-formed XML: %v", err)
			}
			break
		}
	}
	if n := strings.Count(svg, "<polyline"); n != 6 {
		t.Fatalf("want 6 lines (2 throughput, 4 latency), have %d", n)
	}
	if !strings.Contains(sampleResults().html(svg), "<svg") {
		t.Fatal("the HTML report does not embed the chart")
	}
}

func TestCPUSinceCountsThisProcessAsTheLoadGenerator(t *testing.T) {
	before := sampleCPU()
	if _, ok := before[os.Getpid()]; !ok {
		t.Fatalf("this process (pid %d) is not in the sample", os.Getpid())
	}
	// Burn 30 ticks (300 ms) of CPU, however long a busy machine takes to give them.
	_, start, _ := procTicks(os.Getpid())
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		for i := 0; i < 1e5; i++ {
			sink += i
		}
		if _, now, _ := procTicks(os.Getpid()); now-start >= 30 {
			break
		}
	}
	use := cpuSince(before)
	if use[roleLoad] < 300*time.Millisecond {
		t.Fatalf("load generator CPU %s after a 300 ms busy loop; by role: %v", use[roleLoad], use)
	}
	if use.total() < use[roleLoad] {
		t.Fatalf("total %s below one of its parts %s", use.total(), use[roleLoad])
	}
}

var sink int

func TestCPUTableGivesTheRatioOfCPUPerAnswer(t *testing.T) {
	ours := measured{Summary: loadgen.Summary{Calls: 100, ByResult: map[string]int{"GRANTED": 50, "SOLD_OUT": 50}},
		CPU: cpuUse{roleGrab: 30 * time.Millisecond, roleLoad: 10 * time.Millisecond}}
	base := measured{Summary: loadgen.Summary{Calls: 200, ByResult: map[string]int{"GRANTED": 200}},
		CPU: cpuUse{roleRedis: 20 * time.Millisecond}}
	res := &results{}
	res.addCPU(1, ours, base, "ours", "base", "GRANTED")
	// ours: 40 ms over 50 grants = 800 µs; base: 20 ms over 200 = 100 µs.
	if got := res.CPU[0].ratio(); math.Abs(got-0.125) > 1e-9 {
		t.Fatalf("ratio %v, want 0.125", got)
	}
	md := res.cpuTable().markdown()
	for _, want := range []string{"| grab-service | 600 | 0 |", "| redis-server (all) | 0 | 100 |", "| all processes | 800 | 100 |", "| 0.12 |"} {
		if !strings.Contains(md, want) {
			t.Errorf("table lacks %q:\n%s", want, md)
		}
	}
	res.addCPU(2, measured{Summary: loadgen.Summary{ByResult: map[string]int{}}}, base, "none", "base")
	if len(res.CPU) != 1 {
		t.Fatalf("a side without answers was recorded: %d comparisons", len(res.CPU))
	}
}

func TestHTMLRendersBoldCellsAsStrong(t *testing.T) {
	page := sampleResults().html("")
	if strings.Contains(page, "**") || !strings.Contains(page, "<strong>no</strong>") {
		t.Fatalf("the page should show the Markdown bold as <strong>:\n%s", page)
	}
	if htmlCell("**") != "**" || htmlCell("a<b") != "a&lt;b" {
		t.Fatalf("htmlCell: %q %q", htmlCell("**"), htmlCell("a<b"))
	}
}
