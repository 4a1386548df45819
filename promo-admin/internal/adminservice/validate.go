package adminservice

import (
	"time"
	"unicode/utf8"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
)

// MaxReasonLen is the longest stop reason the contract accepts.
const MaxReasonLen = 200

func validateID(id store.ID) error {
	if !promo.ValidPromoID(id.PromoID) {
		return invalid("promoId", "must match ^[A-Za-z0-9-]{1,64}$")
	}
	if !promo.ValidType(id.Type) {
		return invalid("type", "must be an integer from %d to %d", promo.MinType, promo.MaxType)
	}
	return nil
}

// validateSpec checks a create's spec against the contract; the transport has
// already filled the defaults of absent fields (maxPerGrab 1, windowSeconds 60,
// buckets 1).
func validateSpec(s promo.Spec, now time.Time) error {
	if err := validateID(store.ID{PromoID: s.PromoID, Type: s.Type}); err != nil {
		return err
	}
	if !utf8.ValidString(s.Title) || utf8.RuneCountInString(s.Title) > promo.MaxTitleLen {
		return invalid("title", "must be valid UTF-8 of at most %d characters", promo.MaxTitleLen)
	}
	if err := validateTotal(s.Total); err != nil {
		return err
	}
	if err := validateLimits(s.PerPinLimit, s.PerIPLimit); err != nil {
		return err
	}
	if s.MaxPerGrab < 1 {
		return invalid("maxPerGrab", "must be at least 1")
	}
	if err := validateRateLimit(s.RateLimit); err != nil {
		return err
	}
	if err := validateBuckets(s.Buckets); err != nil {
		return err
	}
	if int64(s.Buckets) > s.Total {
		return invalid("buckets", "must be at most total (%d): every bucket holds at least one unit", s.Total)
	}
	if err := validateEnvelope(s); err != nil {
		return err
	}
	if !s.Channels.Valid() {
		return invalid("channels", "must be a list of %s", promo.ChannelNamesText)
	}
	if s.StartAt.IsZero() {
		return invalid("startAt", "is required")
	}
	return validateEnd(s.StartAt, s.EndAt, now)
}

// validateEnvelope checks an envelope pool's spec: total envelopes of at least
// minAmount summing to amount, in one bucket (docs/CONTRACT.md, "Envelope pools").
func validateEnvelope(s promo.Spec) error {
	e := s.Envelope
	switch {
	case e == nil:
		return nil
	case e.RemainingAmount != nil:
		return invalid("envelope.remainingAmount", "is read only: the pool's amount left is shown, never set")
	case s.Buckets > 1:
		return invalid("envelope", "an envelope pool is of one bucket: create it without buckets (or with buckets 1)")
	case s.Total > promo.MaxEnvelopes:
		return invalid("total", "an envelope pool holds at most %d envelopes", promo.MaxEnvelopes)
	case s.MaxPerGrab > promo.MaxEnvelopesPerGrab:
		return invalid("maxPerGrab", "an envelope pool hands out at most %d envelopes to one grab", promo.MaxEnvelopesPerGrab)
	}
	if err := e.Check(s.Total); err != nil {
		return invalid("envelope", "%v", err)
	}
	return nil
}

func validateTotal(total int64) error {
	if total < 1 || total > promo.MaxTotal {
		return invalid("total", "must be an integer from 1 to %d", promo.MaxTotal)
	}
	return nil
}

func validateBuckets(k int) error {
	if k < 1 || k > promo.MaxBuckets {
		return invalid("buckets", "must be an integer from 1 to %d", promo.MaxBuckets)
	}
	return nil
}

func validateLimits(perPin, perIP int64) error {
	if perPin < 0 {
		return invalid("perPinLimit", "must not be negative (0 = unlimited)")
	}
	if perIP < 0 {
		return invalid("perIpLimit", "must not be negative (0 = unlimited)")
	}
	return nil
}

func validateRateLimit(rl *promo.RateLimit) error {
	if rl == nil {
		return nil
	}
	if rl.Limit < 1 {
		return invalid("rateLimit.limit", "must be at least 1")
	}
	if rl.WindowSeconds < 1 || rl.WindowSeconds > promo.MaxWindowSeconds {
		return invalid("rateLimit.windowSeconds", "must be an integer from 1 to %d", promo.MaxWindowSeconds)
	}
	return nil
}

func validateEnd(start, end, now time.Time) error {
	if end.IsZero() {
		return invalid("endAt", "is required")
	}
	if !end.After(start) {
		return invalid("endAt", "must be after startAt (%s)", start.UTC().Format(time.RFC3339Nano))
	}
	if !end.After(now) {
		return invalid("endAt", "must be in the future")
	}
	return nil
}

var errPatchEmpty = invalid("body", "the patch changes nothing: give at least one of total, perPinLimit, perIpLimit, rateLimit, endAt, channels")

// validatePatch checks a patch on its own; the end time is checked against the
// stored start once the row is read.
func validatePatch(p Patch) error {
	if p.Buckets != nil {
		// Compared with the promotion's once the row is read (patchHandler.plan).
		if err := validateBuckets(*p.Buckets); err != nil {
			return err
		}
	} else if p.empty() {
		return errPatchEmpty
	}
	if p.Total != nil {
		if err := validateTotal(*p.Total); err != nil {
			return err
		}
	}
	if p.PerPinLimit != nil && *p.PerPinLimit < 0 {
		return invalid("perPinLimit", "must not be negative (0 = unlimited)")
	}
	if p.PerIPLimit != nil && *p.PerIPLimit < 0 {
		return invalid("perIpLimit", "must not be negative (0 = unlimited)")
	}
	if p.Channels != nil && !p.Channels.Valid() {
		return invalid("channels", "must be a list of %s", promo.ChannelNamesText)
	}
	return validateRateLimit(p.RateLimit)
}

func validateList(q ListQuery) error {
	if q.State != "" && !promo.ValidState(q.State) {
		return invalid("state", "must be one of SCHEDULED, ACTIVE, SOLD_OUT, ENDED, STOPPED, DELETED")
	}
	if q.Limit < 1 || q.Limit > store.MaxListLimit {
		return invalid("limit", "must be an integer from 1 to %d", store.MaxListLimit)
	}
	if q.Cursor != "" && !store.ValidCursor(q.Cursor) {
		return invalid("cursor", "is not a cursor this service gave out")
	}
	return nil
}
