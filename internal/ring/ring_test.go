package ring

import (
	"fmt"
	"testing"
)

func TestContractVectors(t *testing.T) {
	t.Parallel()
	vectors := map[string]int{
		"C_A_1":                14,
		"C_100001_1":           10,
		"C_sku-42_1":           10,
		"C_B_2":                2,
		"C_promo-2026-11-11_1": 8,
		"C_X9_99":              7,
	}
	r := New()
	for key, want := range vectors {
		if have := r.Shard(key); have != want {
			t.Errorf("Shard(%q) = %d, want %d", key, have, want)
		}
	}
}

func TestDistribution(t *testing.T) {
	t.Parallel()
	const keys = 100_000
	counts := make([]int, Shards)
	r := New()
	for i := 0; i < keys; i++ {
		counts[r.Shard(fmt.Sprintf("C_%d_1", i))]++
	}
	mean := float64(keys) / Shards
	for s, c := range counts {
		if dev := (float64(c) - mean) / mean; dev > 0.25 || dev < -0.25 {
			t.Errorf("shard %d holds %d keys, %.1f%% from the mean %.0f", s, c, dev*100, mean)
		}
	}
}

func BenchmarkShard(b *testing.B) {
	r := New()
	for i := 0; i < b.N; i++ {
		r.Shard("C_promo-2026-11-11_1")
	}
}
