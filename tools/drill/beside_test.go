package main

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/flashsale/platform/client"
	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
)

// The checkout client (client/, a module without the platform's dependencies)
// carries its own copy of the ring and of promo.RequestIDBeside, which the load
// uses: both must give what the platform's give, for every length of key (murmur3
// reads 16-byte blocks and a tail of 0 to 15 bytes).
func TestClientRingAndDerivationAreThePlatforms(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:"
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[rnd.IntN(len(alphabet))])
		}
		return b.String()
	}
	for i := 0; i < 5000; i++ {
		key := word(i % 70)
		if got, want := client.Shard(key), ring.Default.Shard(key); got != want {
			t.Fatalf("client.Shard(%q) = %d, ring.Default.Shard = %d", key, got, want)
		}
		base, promoID, typ := word(1+i%40), word(1+rnd.IntN(64)), 1+rnd.IntN(99)
		if got, want := client.RequestIDBeside(base, promoID, typ), promo.RequestIDBeside(base, promo.Key(promoID, typ)); got != want {
			t.Fatalf("client.RequestIDBeside(%q, %q, %d) = %q, promo.RequestIDBeside = %q", base, promoID, typ, got, want)
		}
		if got, want := client.PromotionKey(promoID, typ), promo.Key(promoID, typ); got != want {
			t.Fatalf("client.PromotionKey = %q, promo.Key = %q", got, want)
		}
	}
	if got, want := client.RequestIDBeside("order-1", "sale", 1), promo.RequestIDBeside("order-1", "C_sale_1"); got != want {
		t.Fatalf("%q != %q", got, want)
	}
}

// The client's derivation beside a pin's home bucket names the shard the platform's
// layout (internal/bucket) gives that bucket, for every bucket count.
func TestClientDerivationBesideABucketIsThePlatforms(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		promoID, pin, k := "sale-"+strconv.Itoa(rnd.IntN(1000)), "pin-"+strconv.Itoa(i), 1+i%bucket.Max
		key := promo.Key(promoID, 1)
		want := ring.Default.Shard(key)
		if k > 1 {
			want = bucket.LayoutOf(ring.Default, key, k).Shards[bucket.Home(pin, k)]
		}
		rid := client.RequestIDBesideBucket("order-"+strconv.Itoa(i), promoID, 1, k, pin)
		if got := ring.Default.Shard(promo.RequestIndexKey(rid)); got != want || !strings.HasPrefix(rid, "order-"+strconv.Itoa(i)) {
			t.Fatalf("RequestIDBesideBucket(%s, %d buckets, pin %s) = %q on shard %d, want shard %d", promoID, k, pin, rid, got, want)
		}
	}
}
