package expiry

import (
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

func TestEntriesLapseAtTheirTime(t *testing.T) {
	m := New[string](16, time.Second)
	t0 := time.Unix(1000, 0)
	m.Put("a", "sold out", t0)
	if v, ok := m.Get("a", t0); !ok || v != "sold out" {
		t.Fatalf("before its time: %q %v", v, ok)
	}
	if v, ok := m.Get("a", t0.Add(time.Second-time.Nanosecond)); !ok || v != "sold out" {
		t.Fatalf("just before its time: %q %v", v, ok)
	}
	if _, ok := m.Get("a", t0.Add(time.Second)); ok {
		t.Fatal("an entry outlived its time")
	}
	m.Put("b", "stopped", t0)
	m.Forget("b")
	if _, ok := m.Get("b", t0); ok {
		t.Fatal("a forgotten entry answered")
	}
	m.Put("a", "ended", t0.Add(time.Second)) // a Put renews the entry's time
	if v, ok := m.Get("a", t0.Add(1500*time.Millisecond)); !ok || v != "ended" {
		t.Fatalf("a renewed entry: %q %v", v, ok)
	}
}

// The size bound holds at every Put: the entry put longest ago goes first.
func TestAtMostSizeEntries(t *testing.T) {
	const size = 8
	m := New[int](size, time.Hour)
	t0 := time.Unix(1000, 0)
	for i := range 100 {
		m.Put(strconv.Itoa(i), i, t0)
		if n := m.Len(); n > size {
			t.Fatalf("after %d Puts the map holds %d entries; its size is %d", i+1, n, size)
		}
	}
	for i := range 100 - size {
		if _, ok := m.Get(strconv.Itoa(i), t0); ok {
			t.Fatalf("entry %d, put before the last %d, is still held", i, size)
		}
	}
	for i := 100 - size; i < 100; i++ {
		if v, ok := m.Get(strconv.Itoa(i), t0); !ok || v != i {
			t.Fatalf("entry %d, among the last %d put, is gone", i, size)
		}
	}
}

// A lapsed entry is dropped without being read again: by Sweep, and by the Puts
// of other keys, so memory goes back once a flood of keys stops.
func TestLapsedEntriesAreDroppedUnread(t *testing.T) {
	m := New[int](1<<12, time.Second)
	t0 := time.Unix(1000, 0)
	for i := range 1000 {
		m.Put(strconv.Itoa(i), i, t0)
	}
	if n := m.Sweep(t0.Add(time.Second - time.Nanosecond)); n != 0 || m.Len() != 1000 {
		t.Fatalf("a sweep before their time dropped %d, left %d of 1000", n, m.Len())
	}
	if n := m.Sweep(t0.Add(time.Second)); n != 1000 || m.Len() != 0 {
		t.Fatalf("a sweep at their time dropped %d, left %d of 1000", n, m.Len())
	}

	for i := range 1000 {
		m.Put("old"+strconv.Itoa(i), i, t0)
	}
	later := t0.Add(2 * time.Second)
	for i := range 500 { // each Put drops up to reapPerPut lapsed entries
		m.Put("new"+strconv.Itoa(i), i, later)
	}
	if m.Len() != 500 {
		t.Fatalf("500 Puts after 1000 entries lapsed left %d entries; want the 500 live ones", m.Len())
	}
}

// perEntry is a generous bound on what one entry of a full map costs on the heap:
// the key (a promotion key is at most 75 bytes), the value, the library's list
// element and its map slot. Measured: about 190 bytes with 20-byte keys.
const perEntry = 512

// A million distinct keys (the flood a public route can send) leave at most the
// map's size of entries, and a heap to match.
func TestFloodOfDistinctKeysStaysBounded(t *testing.T) {
	const size, keys = 1 << 14, 1_000_000
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	m := New[int](size, time.Hour)
	t0 := time.Unix(1000, 0)
	for i := range keys {
		m.Put("{C_flood-"+strconv.Itoa(i)+"_1}", i, t0)
		if i%4096 == 0 && m.Len() > size {
			t.Fatalf("after %d keys the map holds %d; its size is %d", i+1, m.Len(), size)
		}
	}
	if m.Len() != size {
		t.Fatalf("the map holds %d entries after a flood; want its size, %d", m.Len(), size)
	}
	grew := int64(heap()) - int64(before)
	t.Logf("%d keys put, %d held, heap grew %d KiB (%d B an entry)", keys, m.Len(), grew>>10, grew/size)
	if bound := int64(size * perEntry); grew > bound {
		t.Fatalf("heap grew %d KiB for a map of %d entries; the bound is %d KiB", grew>>10, size, bound>>10)
	}
	runtime.KeepAlive(m)
}

// Readers and writers at once: the race detector's part.
func TestConcurrentUse(t *testing.T) {
	m := New[int](64, time.Millisecond)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				k := strconv.Itoa((g*7 + i) % 200)
				now := time.Unix(0, int64(i)*int64(time.Microsecond)*10)
				switch i % 5 {
				case 0:
					m.Put(k, i, now)
				case 1:
					m.Forget(k)
				case 2:
					m.Sweep(now)
				default:
					m.Get(k, now)
				}
			}
		})
	}
	wg.Wait()
	if m.Len() > 64 {
		t.Fatalf("%d entries held; the size is 64", m.Len())
	}
}

// BenchmarkGetHit is the sold-out short-circuit's read, from every core at once.
func BenchmarkGetHit(b *testing.B) {
	m := New[int](1<<14, time.Hour)
	now := time.Now()
	m.Put("{C_sold_1}", 1, now)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, ok := m.Get("{C_sold_1}", now); !ok {
				b.Fatal("miss")
			}
		}
	})
}
