package main

import (
	"testing"
	"time"
)

// The hot shard's row is a detail of the redis-server row: shown, never summed
// twice into all processes.
func TestHotShardRowIsNotCountedTwice(t *testing.T) {
	m := measured{CPU: cpuUse{roleRedis: 30 * time.Millisecond, roleRedisHot: 20 * time.Millisecond, roleGrab: 50 * time.Millisecond}}
	m.Calls, m.ByResult = 1000, map[string]int{"GRANTED": 1000}
	per := m.cpuPer("GRANTED")
	if per[cpuAll] != 80 || per[roleRedisHot] != 20 || per[roleRedis] != 30 {
		t.Fatalf("per answer %v: want all processes 80, the hot shard 20 within redis 30", per)
	}
}
