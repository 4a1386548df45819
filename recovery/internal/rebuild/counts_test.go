package rebuild

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestCountsAsAMap sums random keys, through the table's growth, as a map does.
func TestCountsAsAMap(t *testing.T) {
	c, want := newCounts(), map[string]int64{}
	for range 200_000 {
		key := "p" + strconv.Itoa(rand.IntN(30_000))
		n := rand.Int64N(5) - 2
		c.touch(c.hash(key))
		c.add(key, c.hash(key), n)
		want[key] += n
	}
	checkCounts(t, c, want)
}

// TestCountsSameHash keeps apart keys whose hashes are the same, or agree in
// the upper half that the slots keep.
func TestCountsSameHash(t *testing.T) {
	c := newCounts()
	c.add("a", 7, 1)
	c.add("b", 7, 2)
	c.add("c", 7|1<<40, 3)
	c.add("d", 8|7<<32, 4)
	c.add("b", 7, 5)
	c.add("a", 7, 6)
	checkCounts(t, c, map[string]int64{"a": 7, "b": 7, "c": 3, "d": 4})
}

func checkCounts(t *testing.T, c *counts, want map[string]int64) {
	t.Helper()
	if len(c.keys) != len(want) || len(c.sums) != len(want) {
		t.Fatalf("%d keys and %d sums, want %d", len(c.keys), len(c.sums), len(want))
	}
	for i, key := range c.keys {
		if c.sums[i] != want[key] {
			t.Fatalf("%s sums %d, want %d", key, c.sums[i], want[key])
		}
	}
}
