package main

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/flashsale/platform/client"
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
