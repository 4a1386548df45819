package main

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/flashsale/platform/tools/checker"
)

// drill is one fault drill. run injects its faults while the load runs and reports
// what it did and any drill-specific failure (checks) in out.
type drill struct {
	name, title string
	short       bool // part of the --short suite
	run         func(ctx context.Context, d *drillEnv, rd *round, out *outcome)
	saturate    bool // under a load at the stack's peak, not the steady rate
	// replicas: needs the stack's replicas and sentinels (FLASHSALE_REPLICAS=1); run
	// only when named (make drill names it on such a stack, after the others).
	replicas bool
}

// outcome is what a drill reports besides the load and the checker.
type outcome struct {
	mu       sync.Mutex
	faults   int
	bad      int
	checks   []string // drill-specific failures
	notes    []string // facts worth printing that are not failures
	canaries []checker.Promotion
}

func (o *outcome) fail(format string, args ...any) {
	o.mu.Lock()
	o.checks = append(o.checks, fmt.Sprintf(format, args...))
	o.mu.Unlock()
}

func (o *outcome) note(format string, args ...any) {
	o.mu.Lock()
	o.notes = append(o.notes, fmt.Sprintf(format, args...))
	o.mu.Unlock()
}

func allDrills() []drill {
	return []drill{
		{"hostile", "hostile-input storm", true, hostileDrill, false, false},
		{"kafka", "Kafka broker killed mid-sale, back after a pause", true, kafkaDrill, false, false},
		{"crash", "grab-service (now and then the flow sink too) SIGKILLed mid-load, restarted", true, crashDrill, false, false},
		// The same two faults at saturation: grabs share pipelines, one round trip
		// per shard for many, so a crash or a lost broker hits many grabs in flight at once.
		{"kafka-sat", "the Kafka drill at saturation (no pace: the stack's peak)", true, kafkaDrill, true, false},
		{"crash-sat", "the crash drill at saturation (no pace: the stack's peak)", true, crashDrill, true, false},
		{"redis", "a Redis shard SIGKILLed, back empty, rebuilt under load", true, redisDrill, false, false},
		{"replica", "a Redis shard's master lost, a lagging replica promoted in its place, rebuilt", true, replicaDrill, false, false},
		{"mysql", "MariaDB stopped while the flow sink runs", false, mysqlDrill, false, false},
		{"config", "switches flipped mid-load", true, configDrill, false, false},
		{"failover", "two grab-services behind a proxy, one killed", false, failoverDrill, false, false},
		// Needs the stack's replicas and sentinels (FLASHSALE_REPLICAS=1): make drill
		// runs it on such a stack after the others.
		{"sentinel", "a shard's master SIGKILLed at saturation; the sentinels and the healer bring it back, no one woken", false, sentinelDrill, true, true},
	}
}

func drillNames() []string {
	var out []string
	for _, d := range allDrills() {
		out = append(out, d.name)
	}
	return out
}

func selectDrills(o options) ([]drill, error) {
	all := allDrills()
	if o.only == "" {
		var out []drill
		for _, d := range all {
			if !d.replicas && (d.short || !o.short) {
				out = append(out, d)
			}
		}
		return out, nil
	}
	var out []drill
	for _, name := range strings.Split(o.only, ",") {
		found := false
		for _, d := range all {
			if d.name == strings.TrimSpace(name) {
				out = append(out, d)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("no drill %q (have %s)", name, strings.Join(drillNames(), ", "))
		}
	}
	return out, nil
}
