package capacity

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
)

// Figures are what one answer costs, by process, as `make bench` measures them
// (docs/benchmarks.md, "Where the CPU goes" and scenario 5), in µs of CPU; and
// how much faster the production cores are than the machine that measured them.
// `make bench` writes them to bench-results/figures.json.
type Figures struct {
	Source string `json:"source"` // the run the figures come from

	GrabPerGrant   float64 `json:"grabPerGrant,omitempty"`   // grab-service CPU per GRANTED
	GrabPerSoldOut float64 `json:"grabPerSoldOut,omitempty"` // grab-service CPU per sold-out answer
	// RedisPerGrant is every shard's CPU per GRANTED (claim, take, commit);
	// RedisPerSoldOut per sold-out answer (most end in grab-service's cache).
	RedisPerGrant   float64 `json:"redisPerGrant,omitempty"`
	RedisPerSoldOut float64 `json:"redisPerSoldOut,omitempty"`
	// BusiestShardPerGrant is the busiest shard's CPU per grant of one hot
	// promotion in K buckets, by K (scenario 5); K absent: not measured.
	BusiestShardPerGrant map[int]float64 `json:"busiestShardPerGrant,omitempty"`
	KafkaPerEvent        float64         `json:"kafkaPerEvent,omitempty"` // the broker's CPU per flow event
	SinkPerEvent         float64         `json:"sinkPerEvent,omitempty"`  // the flow sink's CPU per event
	MySQLPerEvent        float64         `json:"mysqlPerEvent,omitempty"` // MySQL's CPU per flow row written
	EventBytes           float64         `json:"eventBytes,omitempty"`    // a flow event on the wire, key and headers included

	// Speedup is how many times faster a production core runs the same work (1:
	// the figures' own machine). It divides every CPU figure.
	Speedup float64 `json:"speedup,omitempty"`

	// Machine is the measuring machine's own figures, which predict another mix
	// of answers there (the bench's 1/N check); nil when not measured.
	Machine *Machine `json:"machine,omitempty"`
	// Growth is CPU per GRANTED at other promotion counts and concurrencies
	// (the bench's scaling runs): how far "flat per answer" holds.
	Growth []GrowthPoint `json:"growth,omitempty"`

	// Builtin names the figures a file did not hold, taken from Builtin's run.
	Builtin []string `json:"-"`
}

// Builtin are the figures of the `make bench` run in docs/benchmarks.md, "Latest
// results" (2026-12-03 12:14 UTC, 2 shared cores): the hot phase's CPU per GRANTED
// and the sold-out phase's per answer by process, scenario 5's busiest shard.
// The bench does not measure EventBytes; every run's figures take it from here.
var Builtin = Figures{
	Source:       "make bench, 2026-12-03 12:14 UTC, commit 1f0c7af, 2 shared AMD EPYC cores (docs/benchmarks.md)",
	GrabPerGrant: 149, GrabPerSoldOut: 51,
	RedisPerGrant: 86, RedisPerSoldOut: 1,
	BusiestShardPerGrant: map[int]float64{1: 96.7, 2: 64.4, 4: 55.7, 8: 49.5, 16: 41.0},
	KafkaPerEvent:        31, SinkPerEvent: 16.4, MySQLPerEvent: 28,
	EventBytes: 450, Speedup: 1,
}

// costFields are the JSON names of the per-answer costs a plan needs; a file
// without one of them plans with Builtin's.
var costFields = []string{"grabPerGrant", "grabPerSoldOut", "redisPerGrant", "redisPerSoldOut",
	"busiestShardPerGrant", "kafkaPerEvent", "sinkPerEvent", "mysqlPerEvent", "eventBytes"}

// ParseFigures reads figures written as JSON (a bench run's figures.json, or
// figures given for production hardware) over Builtin: a cost the document does
// not hold is Builtin's, and named in Builtin. A negative or non-finite cost, or
// an unknown field, is refused.
func ParseFigures(b []byte) (Figures, error) {
	var present map[string]json.RawMessage
	if err := json.Unmarshal(b, &present); err != nil {
		return Figures{}, err
	}
	f := Builtin
	f.BusiestShardPerGrant = maps.Clone(Builtin.BusiestShardPerGrant)
	if _, ok := present["busiestShardPerGrant"]; ok {
		f.BusiestShardPerGrant = nil // the file's bucket counts, not merged with the built-in ones
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return Figures{}, err
	}
	for _, name := range costFields {
		if _, ok := present[name]; !ok {
			f.Builtin = append(f.Builtin, name)
		}
	}
	return f, f.check()
}

// ReadFigures is ParseFigures of a file.
func ReadFigures(path string) (Figures, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Figures{}, err
	}
	f, err := ParseFigures(b)
	if err != nil {
		return Figures{}, fmt.Errorf("figures %s: %w", path, err)
	}
	return f, nil
}

// check refuses costs no machine has: negative, NaN or infinite.
func (f Figures) check() error {
	costs := map[string]float64{"grabPerGrant": f.GrabPerGrant, "grabPerSoldOut": f.GrabPerSoldOut,
		"redisPerGrant": f.RedisPerGrant, "redisPerSoldOut": f.RedisPerSoldOut, "kafkaPerEvent": f.KafkaPerEvent,
		"sinkPerEvent": f.SinkPerEvent, "mysqlPerEvent": f.MySQLPerEvent, "eventBytes": f.EventBytes, "speedup": f.Speedup}
	for k, v := range f.BusiestShardPerGrant {
		if k < 1 {
			return fmt.Errorf("busiestShardPerGrant: bucket count %d", k)
		}
		costs[fmt.Sprintf("busiestShardPerGrant[%d]", k)] = v
	}
	for _, name := range slices.Sorted(maps.Keys(costs)) {
		if v := costs[name]; v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: %v is not a cost", name, v)
		}
	}
	return nil
}

// WriteFile writes f as indented JSON, the form ReadFigures reads.
func (f Figures) WriteFile(path string) error {
	if err := f.check(); err != nil {
		return err
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
