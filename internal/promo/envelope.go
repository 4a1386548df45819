package promo

import (
	"fmt"
	"math/rand/v2"
	"slices"
)

// Envelope makes a promotion an envelope pool, the red-envelope design
// (docs/CONTRACT.md, "Envelope pools"): its Total envelopes carry random amounts,
// each at least MinAmount, summing exactly to Amount (integers in the smallest
// currency unit). A grab takes whole envelopes, num of them per item, and is told
// their sum. Fixed at create.
type Envelope struct {
	Amount    int64 `json:"amount"`
	MinAmount int64 `json:"minAmount"`
	// RemainingAmount is the sum of the envelopes not handed out yet: set in the
	// API's views only, never part of a spec.
	RemainingAmount *int64 `json:"remainingAmount,omitempty"`
}

// Bounds of an envelope pool (api/openapi.yaml): the parts are stored one per
// MySQL row and Redis member, and a create loads them all.
// A grab's envelopes are popped in one script call and named in its flow event and
// grab_flow row, so a pool's maxPerGrab is bounded too.
const (
	MaxEnvelopes        = 100_000
	MaxEnvelopeAmount   = 1_000_000_000_000
	MaxEnvelopesPerGrab = 1000
)

// Check says what is wrong with a pool of total envelopes, or nil.
func (e Envelope) Check(total int64) error {
	switch {
	case total > MaxEnvelopes:
		return fmt.Errorf("an envelope pool holds at most %d envelopes (total)", MaxEnvelopes)
	case e.MinAmount < 1:
		return fmt.Errorf("envelope.minAmount must be at least 1")
	case e.Amount < 1 || e.Amount > MaxEnvelopeAmount:
		return fmt.Errorf("envelope.amount must be 1..%d", MaxEnvelopeAmount)
	case e.Amount/total < e.MinAmount:
		return fmt.Errorf("envelope.amount %d cannot give %d envelopes at least %d each", e.Amount, total, e.MinAmount)
	}
	return nil
}

// SplitEnvelope splits amount into n parts of at least min each, summing exactly
// to amount, in the order they will be handed out (Check holds for the pool). The
// split is uniform over every possible split (stars and bars, the bars drawn by
// Floyd's algorithm), so the arrival order changes nothing a buyer could see
// (docs/design.md, "Scripts and keys").
func SplitEnvelope(amount, min int64, n int, rnd *rand.Rand) []int64 {
	spare := amount - int64(n)*min
	places := spare + int64(n) - 1
	bars := make(map[int64]struct{}, n-1)
	for j := places - int64(n-1); j < places; j++ { // Floyd: n-1 distinct of [0, places)
		t := rnd.Int64N(j + 1)
		if _, taken := bars[t]; taken {
			t = j
		}
		bars[t] = struct{}{}
	}
	sorted := make([]int64, 0, n+1)
	sorted = append(sorted, -1)
	for b := range bars {
		sorted = append(sorted, b)
	}
	slices.Sort(sorted[1:])
	sorted = append(sorted, places)
	parts := make([]int64, n)
	for i := range parts {
		parts[i] = min + sorted[i+1] - sorted[i] - 1
	}
	return parts
}
