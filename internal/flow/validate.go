package flow

import (
	"errors"
	"fmt"
	"time"

	"github.com/flashsale/platform/internal/promo"
)

// Bounds of what the record can hold (internal/store migrations: grab_flow's column
// sizes, DATETIME's range) and of what a promotion can be (promo's id rules).
const (
	maxEventID = 64
	maxIP      = 64
	shards     = 16
)

var (
	minOccurred = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxOccurred = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

// validate checks what Decode's presence checks leave open: every id as the grab
// path validates it before it becomes a Redis key or a ledger field, and every value
// within what the flow log stores. An event failing it goes to the dead-letter topic
// instead of into the record, where a rebuild would carry it into Redis
// (FuzzDecode holds it to that).
func (e Event) validate() error {
	switch {
	case len(e.EventID) > maxEventID:
		return fmt.Errorf("eventId longer than %d bytes", maxEventID)
	case !promo.ValidRequestID(e.RequestID):
		return errors.New("requestId must match ^[A-Za-z0-9._:-]{1,128}$")
	case !promo.ValidPin(e.Pin):
		return errors.New("pin must be 1 to 128 printable characters")
	case e.IP == "" || len(e.IP) > maxIP:
		return fmt.Errorf("ip must be 1 to %d bytes", maxIP)
	case e.Channel != "" && !validChannel(e.Channel):
		return fmt.Errorf("channel must be one of %s", promo.ChannelNamesText)
	}
	at, _ := time.Parse(time.RFC3339, e.OccurredAt)
	if at.Before(minOccurred) || at.After(maxOccurred) {
		return fmt.Errorf("occurredAt %s out of range", e.OccurredAt)
	}
	switch {
	case e.HoldUntil != 0 && e.Kind != Grab:
		return errors.New("holdUntil is a GRAB's")
	case e.HoldUntil != 0 && (e.HoldUntil < at.UnixMilli() || e.HoldUntil > at.Add(MaxHoldSpan).UnixMilli()):
		return fmt.Errorf("holdUntil %d is not within %s after occurredAt", e.HoldUntil, MaxHoldSpan)
	}
	return validateItems(e.Items)
}

func validateItems(items []Item) error {
	for i, it := range items {
		if err := it.validate(); err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
	}
	return nil
}

// validate checks one item as the record can hold it and the grab path can route it.
func (it Item) validate() error {
	switch {
	case !promo.ValidPromoID(it.PromoID):
		return errors.New("promoId must match ^[A-Za-z0-9-]{1,64}$")
	case !promo.ValidType(it.Type):
		return fmt.Errorf("type must be %d..%d", promo.MinType, promo.MaxType)
	case it.Num < 1 || it.Num > promo.MaxTotal:
		return fmt.Errorf("num must be 1..%d", promo.MaxTotal)
	case it.Shard < 0 || it.Shard >= shards:
		return fmt.Errorf("shard must be 0..%d", shards-1)
	case it.Buckets < 0 || it.Buckets > shards || it.Bucket < 0 || it.Bucket >= max(it.Buckets, 1):
		return fmt.Errorf("buckets must be 0..%d and bucket below it", shards)
	case it.NoIP && it.Buckets <= 1:
		return errors.New("noIp is of an item of a bucketed promotion")
	case it.Amount < 0 || it.Amount > promo.MaxEnvelopeAmount:
		return fmt.Errorf("amount must be 0..%d", promo.MaxEnvelopeAmount)
	case len(it.Parts) > promo.MaxEnvelopesPerGrab:
		return fmt.Errorf("at most %d envelopes a grab", promo.MaxEnvelopesPerGrab)
	case len(it.Parts) > 0 && (int64(len(it.Parts)) != it.Num || it.Buckets > 1):
		return errors.New("an envelope pool's item names num parts, and its promotion is of one bucket")
	case len(it.Parts) == 0 && it.Amount != 0:
		return errors.New("an amount without the parts it is of")
	}
	for _, p := range it.Parts {
		if p < 0 || p >= promo.MaxEnvelopes {
			return fmt.Errorf("a part index must be 0..%d", promo.MaxEnvelopes-1)
		}
	}
	return nil
}

// validChannel reports whether name is a channel of the contract.
func validChannel(name string) bool {
	_, ok := promo.ParseChannel(name)
	return ok
}
