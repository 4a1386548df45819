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

// Predict is a run on this machine whose answers are soldOutShare sold-out (first
// attempts answered from grab-service's cache) and the rest GRANTED: each
// process's CPU per answer is its two costs weighted by the mix (flat per
// answer: the model's assumption), the cores are the feeding runs' weighted by
// the time each kind of answer takes, and the rate is those cores over the CPU.
func (m Machine) Predict(soldOutShare float64) (Prediction, error) {
	s := soldOutShare
	if math.IsNaN(s) || s < 0 || s > 1 {
		return Prediction{}, fmt.Errorf("sold-out share %v: want 0..1", s)
	}
	tg, ts := sum(m.PerGrant), sum(m.PerSoldOut)
	if (s < 1 && (tg <= 0 || m.GrantCores <= 0)) || (s > 0 && (ts <= 0 || m.SoldOutCores <= 0)) {
		return Prediction{}, fmt.Errorf("the feeding runs measured no cost for this mix (per GRANTED %.0f µs on %.2f cores, per sold-out answer %.0f µs on %.2f cores)",
			tg, m.GrantCores, ts, m.SoldOutCores)
	}
	per := map[string]float64{}
	for role := range m.PerGrant {
		per[role] += (1 - s) * m.PerGrant[role]
	}
	for role := range m.PerSoldOut {
		per[role] += s * m.PerSoldOut[role]
	}
	wg, ws := (1-s)*tg, s*ts
	cores := (wg*m.GrantCores + ws*m.SoldOutCores) / (wg + ws)
	total := sum(per)
	return Prediction{Rate: cores * 1e6 / total, PerAnswer: per, Total: total, Cores: cores}, nil
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
