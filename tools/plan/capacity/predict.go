package capacity

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// The 1/N check: the costs one bench run measured predict another mix of answers
// on the same machine. On cores that are all busy a rate is the cores over the CPU
// per answer, so a mix's CPU per answer (each process's cost per GRANTED and per
// sold-out answer, weighted by the mix) and the cores the feeding runs found
// predict its rate; the same per-process costs are what Size scales to a fleet.
// A GRANTED's cost is not flat: fewer grants in flight share fewer pipelines and
// batches, and the bench's scaling runs measure by how much (docs/capacity.md).

// Tolerance is how close a prediction must come to what is measured: 20% of it.
const Tolerance = 0.2

// Machine is what the feeding runs measured of the machine they ran on.
type Machine struct {
	// Concurrency is the feeding runs' requests in flight.
	Concurrency int `json:"concurrency"`
	// PerGrant and PerSoldOut are µs of CPU per GRANTED (the hot phase) and per
	// sold-out answer (the sold-out phase) by process: every process of the stack
	// and the load generator, other programs on the machine left out.
	PerGrant   map[string]float64 `json:"perGrant"`
	PerSoldOut map[string]float64 `json:"perSoldOut"`
	// GrantCores and SoldOutCores are the CPU-seconds a second those processes
	// used in each feeding run: the machine's cores as the runs found them.
	GrantCores   float64 `json:"grantCores"`
	SoldOutCores float64 `json:"soldOutCores"`
	// OtherCores is what other programs on the machine used meanwhile (the mean
	// of the two runs): not the model's to predict, but what moves the cores the
	// stack gets on a shared machine.
	OtherCores float64 `json:"otherCores"`
}

// Prediction is a run's rate and cost: answers a second, µs of CPU per answer by
// process and in all, and the cores the processes use. A run's measured figures
// take the same form.
type Prediction struct {
	Rate      float64
	PerAnswer map[string]float64
	Total     float64
	Cores     float64
}

// Observe is a measured run in Prediction's form: its rate and CPU per answer by
// process (the total is their sum; the cores, rate times it).
func Observe(rate float64, perAnswer map[string]float64) Prediction {
	total := sum(perAnswer)
	return Prediction{Rate: rate, PerAnswer: perAnswer, Total: total, Cores: rate * total / 1e6}
}

// Predict is a run on this machine at conc requests in flight whose answers are
// soldOutShare sold-out (first attempts answered from grab-service's cache) and
// the rest GRANTED. Each process's CPU per answer is its two costs weighted by
// the mix; a GRANTED costs what it cost at the mix's grants in flight (Little's
// law with the feeding runs' latencies), read off curve, the scaling runs of one
// promotion, with the hot phase's own point among them (grants share
// grab-service's shard pipelines, Kafka's batches and the sink's fetches, so
// fewer in flight pay more each); without a curve, the hot phase's cost: flat
// per answer. The cores are the feeding runs' weighted by the time each kind of
// answer takes; the rate is those cores over the CPU per answer.
func (m Machine) Predict(soldOutShare float64, conc int, curve []GrowthPoint) (Prediction, error) {
	s := soldOutShare
	if math.IsNaN(s) || s < 0 || s > 1 || conc < 1 {
		return Prediction{}, fmt.Errorf("sold-out share %v at concurrency %d: want 0..1 at 1 or more", s, conc)
	}
	tg, ts := sum(m.PerGrant), sum(m.PerSoldOut)
	if (s < 1 && (tg <= 0 || m.GrantCores <= 0)) || (s > 0 && (ts <= 0 || m.SoldOutCores <= 0)) || m.Concurrency < 1 {
		return Prediction{}, fmt.Errorf("the feeding runs measured no cost for this mix (per GRANTED %.0f µs on %.2f cores, per sold-out answer %.0f µs on %.2f cores, concurrency %d)",
			tg, m.GrantCores, ts, m.SoldOutCores, m.Concurrency)
	}
	grant := m.PerGrant
	if s < 1 {
		grant = m.grantCostAt(m.GrantsInFlight(s, conc), curve)
	}
	per := map[string]float64{}
	for role, v := range grant {
		per[role] += (1 - s) * v
	}
	for role, v := range m.PerSoldOut {
		per[role] += s * v
	}
	wg, ws := (1-s)*sum(grant), s*ts
	cores := (wg*m.GrantCores + ws*m.SoldOutCores) / (wg + ws)
	total := sum(per)
	return Prediction{Rate: cores * 1e6 / total, PerAnswer: per, Total: total, Cores: cores}, nil
}

// latency is the mean time a feeding run's answer took: its concurrency over
// its rate (Little's law), the rate being its cores over its CPU per answer.
func (m Machine) latency(per map[string]float64, cores float64) float64 {
	return float64(m.Concurrency) * sum(per) / (cores * 1e6)
}

// GrantsInFlight is how many of conc requests in flight are grants when
// soldOutShare of the answers are sold-out: each kind holds a slot for its mean
// latency in the feeding runs.
func (m Machine) GrantsInFlight(soldOutShare float64, conc int) float64 {
	if soldOutShare <= 0 {
		return float64(conc)
	}
	lg, ls := m.latency(m.PerGrant, m.GrantCores), m.latency(m.PerSoldOut, m.SoldOutCores)
	g, o := (1-soldOutShare)*lg, soldOutShare*ls
	return float64(conc) * g / (g + o)
}

// grantCostAt is each process's CPU per GRANTED at g grants in flight: between
// the two nearest concurrencies measured with one promotion (log-linear in both),
// the nearest one's beyond them. The hot phase's point stands for its own
// concurrency.
func (m Machine) grantCostAt(g float64, curve []GrowthPoint) map[string]float64 {
	pts := []GrowthPoint{{Promotions: 1, Concurrency: m.Concurrency, PerGrant: m.PerGrant}}
	for _, p := range curve {
		if p.Promotions == 1 && p.Concurrency != m.Concurrency && p.Concurrency > 0 && p.Total() > 0 {
			pts = append(pts, p)
		}
	}
	slices.SortFunc(pts, func(a, b GrowthPoint) int { return a.Concurrency - b.Concurrency })
	lo, hi := pts[0], pts[len(pts)-1]
	for i := 1; i < len(pts); i++ {
		if g <= float64(pts[i].Concurrency) {
			lo, hi = pts[i-1], pts[i]
			break
		}
	}
	t := 0.0
	switch {
	case g <= float64(pts[0].Concurrency):
		hi = lo
	case g >= float64(pts[len(pts)-1].Concurrency):
		lo = hi
	default:
		t = math.Log(g/float64(lo.Concurrency)) / math.Log(float64(hi.Concurrency)/float64(lo.Concurrency))
	}
	out := map[string]float64{}
	for role := range union(lo.PerGrant, hi.PerGrant) {
		a, b := lo.PerGrant[role], hi.PerGrant[role]
		if a > 0 && b > 0 {
			out[role] = math.Exp((1-t)*math.Log(a) + t*math.Log(b))
		} else {
			out[role] = (1-t)*a + t*b
		}
	}
	return out
}

// Within says whether predicted is within Tolerance of measured.
func Within(predicted, measured float64) bool {
	return measured > 0 && !math.IsNaN(predicted) && math.Abs(predicted-measured) <= Tolerance*measured
}

// Miss is why a predicted rate is off. The rate is the cores over the CPU per
// answer, so the measured rate over the predicted is the cores the processes got
// (measured over predicted) times the CPU per answer (predicted over measured).
type Miss struct {
	Rate, Cores, CPU float64 // measured ÷ predicted; CPU per answer predicted ÷ measured
	// Process is the one whose CPU per answer missed by the most µs.
	Process             string
	Predicted, Measured float64 // its µs per answer
}

// Explain splits the miss of p against the measured o into its two factors.
func Explain(p, o Prediction) Miss {
	m := Miss{Rate: o.Rate / p.Rate, Cores: o.Cores / p.Cores, CPU: p.Total / o.Total}
	worst := -1.0
	for _, role := range slices.Sorted(maps.Keys(union(p.PerAnswer, o.PerAnswer))) {
		if d := math.Abs(o.PerAnswer[role] - p.PerAnswer[role]); d > worst {
			worst, m.Process, m.Predicted, m.Measured = d, role, p.PerAnswer[role], o.PerAnswer[role]
		}
	}
	return m
}

// String says the miss in a line.
func (m Miss) String() string {
	return fmt.Sprintf("measured rate %.2f of predicted = cores the stack got %.2f of predicted × CPU per answer predicted ÷ measured %.2f; "+
		"the largest miss by process: %s, %.0f µs per answer predicted, %.0f measured",
		m.Rate, m.Cores, m.CPU, m.Process, m.Predicted, m.Measured)
}

func sum(m map[string]float64) float64 {
	t := 0.0
	for _, v := range m {
		t += v
	}
	return t
}

func union(a, b map[string]float64) map[string]float64 {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]float64{}
	}
	for k, v := range b {
		out[k] += v
	}
	return out
}
