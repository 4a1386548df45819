// Package capacity is the capacity model of docs/capacity.md: what one answer
// costs by process (Figures, as `make bench` measures them), a fleet sized for a
// load from those costs (Size), and the same costs predicting another mix of
// answers on the machine that measured them (Machine.Predict), which is how the
// bench checks the model at 1/N.
package capacity

import (
	"fmt"
	"math"
	"slices"
)

// Load is the traffic to plan for.
type Load struct {
	SoldOut  float64 // sold-out (and other refused) answers per second
	Grants   float64 // GRANTED per second (each one GRAB flow event)
	HotShare float64 // the share of Grants one promotion takes, 0..1
	// CancelShare is the share of grants cancelled later (each one CANCEL event).
	CancelShare float64
}

// Fleet is the hardware the plan sizes: cores per instance, the utilization a
// resource may reach at the planned load (1 - headroom), and the shards' count.
type Fleet struct {
	GrabCores, SinkCores, MySQLCores, KafkaCores float64
	Utilization                                  float64
	Shards                                       int // the ring's shard count (16: part of the contract)
	MaxBuckets                                   int // most buckets a promotion may have (16)
}

// Line is one resource of a plan: how much of it the load needs, what is
// provisioned, and how busy it then is.
type Line struct {
	Resource string
	Need     string  // what to provision
	Busy     float64 // utilization at the planned load, 0..1+
	Note     string
}

// Plan is the answer for one load: a line per resource, and the one that
// saturates first (the highest utilization).
type Plan struct {
	Lines []Line
	Bound string
}

// cores is the CPU a rate at cost µs per unit needs on production cores.
func (f Figures) cores(rate, cost float64) float64 {
	s := f.Speedup
	if s <= 0 {
		s = 1
	}
	return rate * cost / s / 1e6
}

// instances is how many of n-core boxes carry need cores at utilization u.
func instances(need, perInstance, u float64) int {
	if need <= 0 {
		return 0
	}
	return max(1, int(math.Ceil(need/(perInstance*u))))
}

// Size plans the fleet for load.
func Size(f Figures, fl Fleet, l Load) Plan {
	events := l.Grants * (1 + l.CancelShare)
	var p Plan
	add := func(line Line) { p.Lines = append(p.Lines, line) }

	grab := f.cores(l.SoldOut, f.GrabPerSoldOut) + f.cores(l.Grants, f.GrabPerGrant)
	n := instances(grab, fl.GrabCores, fl.Utilization)
	add(Line{"grab-service", fmt.Sprintf("%d instances of %g cores (%.1f cores of work)", n, fl.GrabCores, grab),
		grab / (float64(n) * fl.GrabCores), "adds by instances; stateless"})

	add(redisLine(f, fl, l))
	add(hotLine(f, fl, l))

	kafka := f.cores(events, f.KafkaPerEvent)
	brokers := max(3, instances(kafka, fl.KafkaCores, fl.Utilization)) // 3: replication factor
	mbps := events * f.EventBytes / 1e6
	add(Line{"Kafka", fmt.Sprintf("%d brokers of %g cores, %.0f MB/s in (x3 replicated)", brokers, fl.KafkaCores, mbps),
		kafka / (float64(brokers) * fl.KafkaCores), "CPU per event measured on the local kfake broker: a stand-in, not Kafka's own cost"})

	sink := f.cores(events, f.SinkPerEvent)
	sinks := instances(sink, fl.SinkCores, fl.Utilization)
	add(Line{"flow sink", fmt.Sprintf("%d instances of %g cores; topic partitions >= %d", sinks, fl.SinkCores, max(sinks, 16)),
		sink / (float64(sinks) * fl.SinkCores), "adds by instances up to the partition count"})

	mysql := f.cores(events, f.MySQLPerEvent)
	add(Line{"MySQL", fmt.Sprintf("%.0f rows/s written; %.1f cores of %g", events, mysql, fl.MySQLCores),
		mysql / fl.MySQLCores, "one primary: beyond it, shard the record by promotion"})

	best := -1.0
	for _, line := range p.Lines {
		if line.Busy > best {
			best, p.Bound = line.Busy, line.Resource
		}
	}
	return p
}

// redisLine: the shards' total work, one core each (Redis runs scripts on one thread).
func redisLine(f Figures, fl Fleet, l Load) Line {
	need := f.cores(l.Grants, f.RedisPerGrant) + f.cores(l.SoldOut, f.RedisPerSoldOut)
	busy := need / float64(fl.Shards)
	note := fmt.Sprintf("%d masters, one core each, if the load spreads over them", fl.Shards)
	if need > float64(fl.Shards)*fl.Utilization {
		note = fmt.Sprintf("more than %d shards' cores: the ring's shard count must grow (docs/capacity.md)", fl.Shards)
	}
	return Line{"Redis shards", fmt.Sprintf("%.1f cores of script work over %d masters", need, fl.Shards), busy, note}
}

// hotLine: the hot promotion's busiest shard, at the fewest buckets that keep it
// under the utilization (scenario 5's figures by bucket count).
func hotLine(f Figures, fl Fleet, l Load) Line {
	hot := l.Grants * l.HotShare
	if hot <= 0 {
		return Line{"hot promotion's busiest shard", "no hot promotion", 0, ""}
	}
	var ks []int
	for k := range f.BusiestShardPerGrant {
		if k <= fl.MaxBuckets {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	var k int
	var busy float64
	for _, k = range ks {
		if busy = f.cores(hot, f.BusiestShardPerGrant[k]); busy <= fl.Utilization {
			break
		}
	}
	need := fmt.Sprintf("%d buckets (%.0f grants/s of one promotion)", k, hot)
	note := "one core per shard: buckets spread a promotion over shards"
	if busy > fl.Utilization {
		note = fmt.Sprintf("past its headroom even at %d buckets: faster cores, or fewer shard calls per grant (docs/capacity.md, \"The hot promotion\")", k)
	}
	return Line{"hot promotion's busiest shard", need, busy, note}
}
