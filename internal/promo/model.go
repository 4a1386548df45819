// Package promo is the promotion model both services share: the spec, its states,
// id validation and the Redis key builders.
package promo

import (
	"time"
	"unicode"
	"unicode/utf8"
)

// State is a promotion's state as the API shows it.
type State string

const (
	Scheduled State = "SCHEDULED"
	Active    State = "ACTIVE"
	SoldOut   State = "SOLD_OUT"
	Ended     State = "ENDED"
	Stopped   State = "STOPPED"
	Deleted   State = "DELETED"
)

// ValidState reports whether s is one of the contract's states.
func ValidState(s string) bool {
	switch State(s) {
	case Scheduled, Active, SoldOut, Ended, Stopped, Deleted:
		return true
	}
	return false
}

// Limits of the contract (api/openapi.yaml).
const (
	MaxTotal         = 1_000_000_000
	MaxWindowSeconds = 3600
	MaxTitleLen      = 200
	MinType, MaxType = 1, 99
	MaxItemsPerGrab  = 50 // items of one grab (and of its request index entry)
)

// The contract's id patterns, checked by a byte table rather than a regexp: every
// grab checks its requestId and each promoId before anything else, and the regexp
// engine was 3% of grab-service's CPU in the sold-out phase. model_test.go holds the
// patterns themselves and fuzzes the two against each other.
var (
	promoIDBytes   = idBytes("-")    // ^[A-Za-z0-9-]{1,64}$
	requestIDBytes = idBytes("._:-") // ^[A-Za-z0-9._:-]{1,128}$
)

// idBytes is the set of ASCII letters and digits, plus extra.
func idBytes(extra string) (set [256]bool) {
	for c := '0'; c <= '9'; c++ {
		set[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		set[c], set[c-'a'+'A'] = true, true
	}
	for i := range len(extra) {
		set[extra[i]] = true
	}
	return set
}

// validID reports whether id is 1..max bytes, all of set.
func validID(id string, max int, set *[256]bool) bool {
	if len(id) == 0 || len(id) > max {
		return false
	}
	for i := range len(id) {
		if !set[id[i]] {
			return false
		}
	}
	return true
}

// ValidPromoID reports whether id may become part of a Redis key.
func ValidPromoID(id string) bool { return validID(id, 64, &promoIDBytes) }

// ValidType reports whether t is a promotion type of the contract.
func ValidType(t int) bool { return t >= MinType && t <= MaxType }

// ValidRequestID reports whether id may be stored in the request ledger.
func ValidRequestID(id string) bool { return validID(id, 128, &requestIDBytes) }

// ValidPin accepts 1..128 bytes of printable, non-space UTF-8: no C0 or C1
// control, no format character (category Cf: U+200B, U+202E, U+FEFF...), which
// would let two pins look alike in a log or a console, and no invalid UTF-8.
func ValidPin(pin string) bool {
	if len(pin) == 0 || len(pin) > 128 {
		return false
	}
	for _, r := range pin {
		if r < utf8.RuneSelf {
			if r <= ' ' || r == 0x7f {
				return false
			}
			continue
		}
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.IsSpace(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// RateLimit is the promotion-level window: at most Limit grab attempts per window.
type RateLimit struct {
	Limit         int64 `json:"limit"`
	WindowSeconds int64 `json:"windowSeconds"`
}

// Spec is what a merchandiser sets. Zero limits mean unlimited.
type Spec struct {
	PromoID     string     `json:"promoId"`
	Type        int        `json:"type"`
	Title       string     `json:"title,omitempty"`
	Total       int64      `json:"total"`
	PerPinLimit int64      `json:"perPinLimit"`
	PerIPLimit  int64      `json:"perIpLimit"`
	MaxPerGrab  int64      `json:"maxPerGrab"`
	RateLimit   *RateLimit `json:"rateLimit,omitempty"`
	StartAt     time.Time  `json:"startAt"`
	EndAt       time.Time  `json:"endAt"`
	// Buckets splits the stock over that many shards (internal/bucket); 0 in a
	// request means 1. Fixed at create.
	Buckets int `json:"buckets,omitempty"`
	// Envelope makes the promotion an envelope pool (envelope.go); nil for an
	// ordinary one. Fixed at create.
	Envelope *Envelope `json:"envelope,omitempty"`
	// Channels are the sales channels the promotion is sold on (channel.go):
	// empty, left out of the JSON, is every channel.
	Channels Channels `json:"channels,omitempty"`
}

// MaxBuckets is the most buckets a promotion may have: one per shard.
const MaxBuckets = 16

// BucketsOf is the bucket count a stored or sent value stands for: 1 for 0.
func BucketsOf(n int) int { return max(n, 1) }

// Key is the promotion's Redis hash key.
func (s Spec) Key() string { return Key(s.PromoID, s.Type) }

// Promotion is a spec with its state and live counters, as the API returns it.
type Promotion struct {
	Spec
	Key       string `json:"key"`
	Shard     int    `json:"shard"`
	State     State  `json:"state"`
	Remaining int64  `json:"remaining"`
	Granted   int64  `json:"granted"`
	// BucketShards and BucketRemaining are by bucket (a promotion in more than one
	// bucket only): the shard each lives on and its stock left; Remaining and
	// Granted are the sums.
	BucketShards    []int     `json:"bucketShards,omitempty"`
	BucketRemaining []int64   `json:"bucketRemaining,omitempty"`
	CreatedAt       time.Time `json:"createdAt"`
	UpdatedAt       time.Time `json:"updatedAt"`
}

// DeriveState turns the stored admin state (ACTIVE, STOPPED or DELETED) and the
// live remaining into the state the API shows at time now.
func DeriveState(stored State, start, end time.Time, remaining int64, now time.Time) State {
	switch {
	case stored == Stopped || stored == Deleted:
		return stored
	case now.Before(start):
		return Scheduled
	case !now.Before(end):
		return Ended
	case remaining <= 0:
		return SoldOut
	}
	return Active
}
