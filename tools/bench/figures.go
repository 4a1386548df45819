package main

import (
	"fmt"
	"math"
	"runtime/debug"

	"github.com/flashsale/platform/tools/plan/capacity"
)

// The run's figures for the capacity model (tools/plan/capacity): what each
// answer cost by process, written to figures.json beside the report so that
// `bin/plan --figures bench-results/figures.json` plans from this run.

// stackPer keeps the processes of the stack and the load generator of a cpuPer
// map: other programs on the machine are not the model's to predict, and the
// sum is the model's to make.
func stackPer(per map[string]float64) map[string]float64 {
	if per == nil {
		return nil
	}
	out := map[string]float64{}
	for role, v := range per {
		if role != roleOther && role != cpuAll && v > 0 {
			out[role] = v
		}
	}
	return out
}

// stackCores is the CPU-seconds a second the stack and the load generator used
// during a run: the machine's cores as that run found them.
func stackCores(m *measured) float64 {
	return coresOf(m, func(role string) bool { return role != roleOther })
}

// otherCores is the CPU-seconds a second other programs used during a run.
func otherCores(m *measured) float64 {
	return coresOf(m, func(role string) bool { return role == roleOther })
}

func coresOf(m *measured, counted func(role string) bool) float64 {
	if m == nil || m.Elapsed <= 0 {
		return 0
	}
	var d float64
	for role, t := range m.CPU {
		if counted(role) {
			d += t.Seconds()
		}
	}
	return d / m.Elapsed.Seconds()
}

// machineFigures are the hot and sold-out phases' median runs as the model's
// Machine; nil unless both ran.
func (res *results) machineFigures() *capacity.Machine {
	hot, sold := res.TargetRuns.Hot, res.TargetRuns.SoldOut
	if hot == nil || sold == nil {
		return nil
	}
	g, s := stackPer(hot.cpuPer("GRANTED")), stackPer(sold.cpuPer())
	if len(g) == 0 || len(s) == 0 {
		return nil
	}
	return &capacity.Machine{Concurrency: res.Conc, PerGrant: g, PerSoldOut: s,
		GrantCores: stackCores(hot), SoldOutCores: stackCores(sold), OtherCores: (otherCores(hot) + otherCores(sold)) / 2}
}

// modelFigures are this run's figures in the model's form; a cost the run did
// not measure is left out (zero), and bin/plan takes the built-in one for it.
func (res *results) modelFigures() capacity.Figures {
	t := res.TargetRuns
	f := capacity.Figures{
		Source: fmt.Sprintf("bin/bench run of %s%s, %d cores (%s), concurrency %d", res.Started.Format("2006-01-02 15:04 UTC"),
			revision(), res.Machine.Cores, res.Machine.CPU, res.Conc),
		GrabPerGrant: finite(cpuPerAnswer(t.Hot, roleGrab, "GRANTED")), GrabPerSoldOut: finite(cpuPerAnswer(t.SoldOut, roleGrab)),
		RedisPerGrant: finite(cpuPerAnswer(t.Hot, roleRedis, "GRANTED")), RedisPerSoldOut: finite(cpuPerAnswer(t.SoldOut, roleRedis)),
		// The hot phase cancels nothing: its events are its GRANTED answers.
		KafkaPerEvent: finite(cpuPerAnswer(t.Hot, roleKafka, "GRANTED")), SinkPerEvent: finite(cpuPerAnswer(t.Hot, roleSink, "GRANTED")),
		MySQLPerEvent: finite(cpuPerAnswer(t.Hot, roleMySQL, "GRANTED")),
		Speedup:       1,
		Machine:       res.machineFigures(),
		Growth:        res.Growth,
	}
	for _, r := range res.Buckets {
		if r.Busiest.CPUus > 0 {
			if f.BusiestShardPerGrant == nil {
				f.BusiestShardPerGrant = map[int]float64{}
			}
			f.BusiestShardPerGrant[r.K] = r.Busiest.CPUus
		}
	}
	return f
}

// finite is v, or 0 (not measured, left out of the file) when it is NaN.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// revision is ", commit <12 hex>" of the build, when the build recorded one.
func revision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return ""
	}
	if dirty {
		rev += " with local changes"
	}
	return ", commit " + rev
}
