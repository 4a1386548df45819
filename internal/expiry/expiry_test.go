package expiry

import (
	"testing"
	"time"
)

func TestEntriesLapseAtTheirTime(t *testing.T) {
	var m Map[string]
	t0 := time.Unix(1000, 0)
	m.Put("a", "sold out", t0.Add(time.Second))
	if v, ok := m.Get("a", t0); !ok || v != "sold out" {
		t.Fatalf("before its time: %q %v", v, ok)
	}
	if _, ok := m.Get("a", t0.Add(time.Second)); ok {
		t.Fatal("an entry outlived its time")
	}
	if _, ok := m.Get("a", t0); ok {
		t.Fatal("a lapsed entry was kept")
	}
	m.Put("b", "stopped", t0.Add(time.Hour))
	m.Forget("b")
	if _, ok := m.Get("b", t0); ok {
		t.Fatal("a forgotten entry answered")
	}
}
