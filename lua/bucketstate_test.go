package lua

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/flashsale/platform/internal/promo"
)

// relay hands bucket 0 a bucket's change as a relay would, and returns the sale's
// states bucket 0 announced.
func relay(t *testing.T, bucket, state string, seq int64) []string {
	t.Helper()
	ch := promo.StateChange{Key: bucket, State: state, Seq: seq, AtMs: now, Member: fmt.Sprintf("%d|%s|%s|%d", seq, state, bucket, now)}
	changes, err := RelayBucketState(context.Background(), rdb, promo.StateOutboxKey, ch, now)
	if err != nil {
		t.Fatalf("relay %s %s %d: %v", bucket, state, seq, err)
	}
	return changesOf(t, promo.BucketBase(bucket), changes)
}

// TestBucketStateRelay: bucket 0 announces SOLD_OUT once every bucket is empty and
// RESTOCKED once one refills after it, once each; a repeated or stale change of a
// bucket (seq no newer than the last applied) changes nothing, whatever order the
// relays arrive in.
func TestBucketStateRelay(t *testing.T) {
	b0 := promoKey(t, "relay")
	b1, b2 := b0+":b1", b0+":b2"
	s := baseSpec()
	s.Total, s.Buckets = 3, 3
	mustCreate(t, b0, s)

	wantStates(t, "b1 empty", relay(t, b1, StateBucketEmpty, 10))
	wantStates(t, "b2 empty", relay(t, b2, StateBucketEmpty, 10))
	wantStates(t, "b1 empty again", relay(t, b1, StateBucketEmpty, 10))
	wantStates(t, "b0 empty: every bucket is", relay(t, b0, StateBucketEmpty, 11), StateSoldOut)
	wantStates(t, "b0 empty repeated", relay(t, b0, StateBucketEmpty, 11))
	wantStates(t, "b1 filled, stale", relay(t, b1, StateBucketFilled, 9))
	wantStates(t, "b1 filled", relay(t, b1, StateBucketFilled, 12), StateRestocked)
	wantStates(t, "b2 filled: restocked already", relay(t, b2, StateBucketFilled, 12))
	// b1's later refill arrives before its earlier sell-out: the sell-out is stale.
	wantStates(t, "b2 empty", relay(t, b2, StateBucketEmpty, 13))
	wantStates(t, "b1 filled (seq 15) first", relay(t, b1, StateBucketFilled, 15))
	wantStates(t, "b1 empty (seq 14) late", relay(t, b1, StateBucketEmpty, 14))
	wantStates(t, "b1 empty (seq 16): every bucket is", relay(t, b1, StateBucketEmpty, 16), StateSoldOut)

	if _, err := Stop(context.Background(), rdb, onShard, b0, 2, now); err != nil {
		t.Fatal(err)
	}
	wantStates(t, "b2 filled after the stop", relay(t, b2, StateBucketFilled, 20)) // the sale announces no stock once stopped
}

// TestBucketStateRelayConverges: whatever order and however often the relays of
// each bucket's changes arrive, bucket 0 ends knowing each bucket's last state,
// and the sale's last announced state is the truth: SOLD_OUT exactly when every
// bucket's last change emptied it.
func TestBucketStateRelayConverges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		b0 := promoKey(t, fmt.Sprint("conv", round))
		buckets := []string{b0, b0 + ":b1", b0 + ":b2", b0 + ":b3"}
		s := baseSpec()
		s.Total, s.Buckets = 4, 4
		mustCreate(t, b0, s)
		type change struct {
			bucket string
			empty  bool
			seq    int64
		}
		var changes []change
		last := map[string]bool{}
		for i, b := range buckets { // each bucket empties and refills a few times, then maybe empties
			n := 1 + rng.IntN(4)
			for j := range n {
				changes = append(changes, change{b, j%2 == 0, int64(100*i + j + 1)})
				last[b] = j%2 == 0
			}
		}
		rng.Shuffle(len(changes), func(i, j int) { changes[i], changes[j] = changes[j], changes[i] })
		changes = append(changes, changes[:len(changes)/2]...) // repeats, after the fact
		var announced []string
		for _, c := range changes {
			state := StateBucketFilled
			if c.empty {
				state = StateBucketEmpty
			}
			announced = append(announced, relay(t, c.bucket, state, c.seq)...)
		}
		allEmpty := last[buckets[0]] && last[buckets[1]] && last[buckets[2]] && last[buckets[3]]
		lastSale := ""
		if len(announced) > 0 {
			lastSale = announced[len(announced)-1]
		}
		if allEmpty != (lastSale == StateSoldOut) {
			t.Fatalf("round %d: every bucket empty %v, but the sale's last announcement is %q (%s)", round, allEmpty, lastSale, strings.Join(announced, ","))
		}
		for i := 1; i < len(announced); i++ {
			if announced[i] == announced[i-1] {
				t.Fatalf("round %d: %s announced twice in a row: %v", round, announced[i], announced)
			}
		}
	}
}

// TestBucketStateRelayRefusesAForeignBucket: a change names a bucket of the
// promotion it is relayed to, and an ordinary promotion hears nothing.
func TestBucketStateRelayRefusesAForeignBucket(t *testing.T) {
	b0, other := promoKey(t, "own"), promoKey(t, "other")
	s := baseSpec()
	s.Buckets = 2
	mustCreate(t, b0, s)
	ch := promo.StateChange{Key: other + ":b1", State: StateBucketEmpty, Seq: 1, Member: "x"}
	if _, err := bucketStateScript.Run(context.Background(), rdb, []string{b0, promo.StateOutboxKey}, now, ch.Key, 1, 1).Result(); err == nil {
		t.Fatal("bucket 0 applied another promotion's bucket")
	}
	plain := promoKey(t, "plain")
	mustCreate(t, plain, baseSpec())
	if got := relay(t, plain, StateBucketEmpty, 5); len(got) != 0 {
		t.Fatalf("an ordinary promotion announced %v", got)
	}
	if _, err := RelayBucketState(context.Background(), rdb, promo.StateOutboxKey, promo.StateChange{Key: b0, State: StateSoldOut}, now); err == nil {
		t.Fatal("a sale's own change was relayed as a bucket's")
	}
}
