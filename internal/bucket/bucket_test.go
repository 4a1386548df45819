package bucket

import (
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
)

func TestKeysSitOnDistinctShards(t *testing.T) {
	for k := 1; k <= Max; k++ {
		keys := Keys(ring.Default, "C_hot_1", k)
		shards := map[int]bool{}
		for _, bk := range keys {
			shards[ring.Default.Shard(bk)] = true
		}
		if len(keys) != k || len(shards) != k {
			t.Fatalf("k=%d: %d keys on %d shards", k, len(keys), len(shards))
		}
		if !reflect.DeepEqual(keys, Keys(ring.Default, "C_hot_1", k)) {
			t.Fatalf("k=%d: layout not deterministic", k)
		}
		if k > 1 && !reflect.DeepEqual(keys[:k-1], Keys(ring.Default, "C_hot_1", k-1)) {
			t.Fatalf("k=%d: not an extension of k-1", k)
		}
	}
}

func TestKeysRefuseMoreBucketsThanShards(t *testing.T) {
	for _, k := range []int{0, -1, Max + 1} {
		if keys := Keys(ring.Default, "C_hot_1", k); keys != nil {
			t.Errorf("k=%d: %v", k, keys)
		}
	}
}

func TestShares(t *testing.T) {
	for _, c := range []struct {
		total int64
		k     int
		want  []int64
	}{{10, 1, []int64{10}}, {10, 4, []int64{3, 3, 2, 2}}, {3, 4, []int64{1, 1, 1, 0}}, {0, 2, []int64{0, 0}}} {
		if got := Shares(c.total, c.k); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Shares(%d, %d) = %v, want %v", c.total, c.k, got, c.want)
		}
	}
}

func TestPlan(t *testing.T) {
	for _, c := range []struct {
		stock, pin, ip int
		want           []Part
	}{
		{0, 0, 0, []Part{{0, "spi"}}}, // every home is the stock bucket: one part of all three
		{1, 1, 2, []Part{{1, "sp"}, {2, "i"}}},
		{1, 2, 1, []Part{{1, "si"}, {2, "p"}}},
		{3, 0, 0, []Part{{3, "s"}, {0, "pi"}}},
		{3, 0, 1, []Part{{3, "s"}, {0, "p"}, {1, "i"}}},
		// The ip counted nowhere: every part says so, and a grab from its pin's
		// home is one part.
		{2, 2, NoIPHome, []Part{{2, "spn"}}},
		{3, 0, NoIPHome, []Part{{3, "sn"}, {0, "pn"}}},
	} {
		if got := Plan(c.stock, c.pin, c.ip); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Plan(%d, %d, %d) = %v, want %v", c.stock, c.pin, c.ip, got, c.want)
		}
	}
}

// Bucket 0 is the promotion key itself, so an ordinary promotion is one of one
// bucket; a grab's parts name their buckets' keys and shards, and a pin and an ip
// each count on their own home alone.
func TestLayoutAndParts(t *testing.T) {
	const key = "C_hot_1"
	if keys := Keys(ring.Default, key, 1); !reflect.DeepEqual(keys, []string{key}) {
		t.Fatalf("one bucket: %v, want the promotion key alone", keys)
	}
	l := LayoutOf(ring.Default, key, 8)
	if l.K != 8 || l.Keys[0] != key || l.Shards[0] != ring.Default.Shard(key) {
		t.Fatalf("layout %+v", l)
	}
	for n := range 200 {
		pin, ip := "pin-"+strconv.Itoa(n), "ip-"+strconv.Itoa(n%37)
		stock := n % 8
		letters := map[int]string{}
		for _, p := range l.Parts(stock, pin, ip, false) {
			if p.Key != l.Keys[p.Bucket] || p.Shard != l.Shards[p.Bucket] || letters[p.Bucket] != "" {
				t.Fatalf("part %+v of layout %+v (twice, or not its bucket's)", p, l)
			}
			letters[p.Bucket] = p.Letters
		}
		for b, want := range map[int]string{stock: promo.PartStock, Home(pin, 8): promo.PartPin, Home(ip, 8): promo.PartIP} {
			if !strings.Contains(letters[b], want) {
				t.Fatalf("grab %d: bucket %d has %q, want %q in it (stock %d)", n, b, letters[b], want, stock)
			}
		}
		if got := len(strings.Join(slices.Collect(maps.Values(letters)), "")); got != 3 {
			t.Fatalf("grab %d: letters %v, want s, p and i once each", n, letters)
		}
	}
}

// A grab that counts the ip nowhere touches the ip's home only when it is its
// stock's or its pin's, and then counts nothing there for the ip.
func TestPartsWithoutTheIP(t *testing.T) {
	l := LayoutOf(ring.Default, "C_hot_1", 8)
	for n := range 200 {
		pin, ip := "pin-"+strconv.Itoa(n), "ip-"+strconv.Itoa(n%37)
		stock, home := n%8, Home(pin, 8)
		parts := l.Parts(stock, pin, ip, true)
		if want := 1 + min(1, abs(stock-home)); len(parts) != want {
			t.Fatalf("grab %d: %d parts %v, want %d (stock %d, pin home %d)", n, len(parts), parts, want, stock, home)
		}
		for _, p := range parts {
			if strings.Contains(p.Letters, promo.PartIP) || !strings.Contains(p.Letters, promo.PartNoIP) {
				t.Fatalf("grab %d: part %+v: every part says n, none counts the ip", n, p)
			}
		}
	}
}

func abs(x int) int { return max(x, -x) }
