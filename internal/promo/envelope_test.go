package promo

import (
	"math/rand/v2"
	"testing"
)

// Any split of a valid pool sums exactly to its amount, every part at least the
// minimum: drawn over random pools, the tight ones (amount = n * min) and the
// one-envelope pool among them.
func TestSplitEnvelopeSumsExactlyWithEveryPartAtLeastTheMinimum(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	check := func(amount, min int64, n int) {
		t.Helper()
		parts := SplitEnvelope(amount, min, n, rnd)
		if len(parts) != n {
			t.Fatalf("split(%d, %d, %d): %d parts", amount, min, n, len(parts))
		}
		var sum int64
		for i, p := range parts {
			if p < min {
				t.Fatalf("split(%d, %d, %d): part %d is %d, below the minimum", amount, min, n, i, p)
			}
			sum += p
		}
		if sum != amount {
			t.Fatalf("split(%d, %d, %d): parts sum to %d", amount, min, n, sum)
		}
	}
	for range 2000 {
		n := 1 + rnd.IntN(600)
		min := 1 + rnd.Int64N(500)
		amount := int64(n)*min + rnd.Int64N(100_000)
		if (Envelope{Amount: amount, MinAmount: min}).Check(int64(n)) != nil {
			t.Fatalf("pool %d/%d/%d should be valid", amount, min, n)
		}
		check(amount, min, n)
		check(int64(n)*min, min, n) // nothing above the minimums
	}
	check(1, 1, 1)
	check(MaxEnvelopeAmount, 1, MaxEnvelopes)
}

// The split is uniform: each position's mean is the pool's mean, the first and
// the last alike (the double-mean split's spread grows with the position; this
// one's must not).
func TestSplitEnvelopeGivesEveryPositionTheSameDistribution(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	const n, rounds = 10, 20000
	var first, last, firstSq, lastSq float64
	for range rounds {
		p := SplitEnvelope(1000, 1, n, rnd)
		first, last = first+float64(p[0]), last+float64(p[n-1])
		firstSq, lastSq = firstSq+float64(p[0]*p[0]), lastSq+float64(p[n-1]*p[n-1])
	}
	meanFirst, meanLast := first/rounds, last/rounds
	varFirst, varLast := firstSq/rounds-meanFirst*meanFirst, lastSq/rounds-meanLast*meanLast
	if meanFirst < 95 || meanFirst > 105 || meanLast < 95 || meanLast > 105 {
		t.Fatalf("means of the first and last envelopes %.1f, %.1f; want about 100", meanFirst, meanLast)
	}
	if r := varLast / varFirst; r < 0.9 || r > 1.1 {
		t.Fatalf("variance of the last envelope is %.2f times the first's; want about 1", r)
	}
}

func TestEnvelopeCheckRefusesWhatCannotBeSplit(t *testing.T) {
	for _, c := range []struct {
		e     Envelope
		total int64
	}{
		{Envelope{Amount: 99, MinAmount: 1}, 100},
		{Envelope{Amount: 100, MinAmount: 0}, 10},
		{Envelope{Amount: 0, MinAmount: 1}, 1},
		{Envelope{Amount: MaxEnvelopeAmount + 1, MinAmount: 1}, 1},
		{Envelope{Amount: MaxEnvelopeAmount, MinAmount: 1}, MaxEnvelopes + 1},
	} {
		if c.e.Check(c.total) == nil {
			t.Errorf("%+v of %d envelopes: accepted", c.e, c.total)
		}
	}
	if err := (Envelope{Amount: 1000, MinAmount: 2}).Check(500); err != nil {
		t.Errorf("1000 over 500 envelopes of at least 2: %v", err)
	}
}

// Every split is as likely as any other: 2 over 3 envelopes of at least 1 (3
// over 3 places) splits 6 ways, and each must come about a sixth of the time.
// (Cuts drawn with replacement and sorted would make the splits with equal cuts,
// {0,2,0}-like, half as likely.)
func TestSplitEnvelopeMakesEverySplitEquallyLikely(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	const rounds = 60000
	seen := map[[3]int64]int{}
	for range rounds {
		p := SplitEnvelope(5, 1, 3, rnd)
		seen[[3]int64(p)]++
	}
	if len(seen) != 6 {
		t.Fatalf("%d distinct splits of 5 over 3 (at least 1 each), want 6: %v", len(seen), seen)
	}
	for split, n := range seen {
		if n < rounds/6*9/10 || n > rounds/6*11/10 {
			t.Errorf("split %v came %d times of %d, want about a sixth", split, n, rounds)
		}
	}
}
