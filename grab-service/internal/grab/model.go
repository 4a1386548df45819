// Package grab is grab-service's business logic: take qualification on the shards
// (q.lua), commit it behind the Kafka acknowledgement of its GRAB flow event, return
// it on any failure or cancel, and reconcile takes left open by a crash.
package grab

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/jsonx"
	"github.com/flashsale/platform/internal/promo"
)

// Item is one promotion of a grab.
type Item struct {
	PromoID string `json:"promoId"`
	Type    int    `json:"type"`
	Num     int64  `json:"num"`
	// buckets is the bucket count the grab path believes the promotion has (0 or 1:
	// an ordinary promotion), bucket the one its units are taken from (buckets.go).
	buckets, bucket int
	// noIP: a bucketed item whose grab counts the ip nowhere, as its promotion has
	// no ip limit (flow.Item.NoIP).
	noIP bool
}

// Request is a validated grab.
type Request struct {
	RequestID string `json:"requestId"`
	Pin       string `json:"pin"`
	IP        string `json:"ip"`
	Items     []Item `json:"items"`
	// HoldSeconds, when above 0, makes the grant a hold: not confirmed
	// (POST /v1/grab/{requestId}/confirm) within it, the platform returns it
	// (holds.go).
	HoldSeconds int `json:"holdSeconds,omitempty"`
	// Channel is the sales channel the grab comes through (promo.NoChannel when
	// it names none): q.lua refuses an item of a promotion not sold on it.
	Channel promo.Channel `json:"-"`
	// FirstAttempt is the caller's word that it has never sent this requestId
	// before (the X-Grab-Attempt header at 1), so the requestId holds nothing: a
	// refusal the local cache knows is answered without looking it up in the
	// request index. A caller that says so of a retry may be refused for a grant it
	// holds; it is not part of the body, so not of the replay's identity.
	FirstAttempt bool `json:"-"`
}

// bodyHash fingerprints the request so a replay with another body is told apart.
func (r Request) bodyHash() string {
	h := sha256.New()
	for _, s := range []string{r.RequestID, r.Pin, r.IP} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	for _, it := range r.Items {
		h.Write([]byte(it.PromoID + "\x00" + strconv.Itoa(it.Type) + "\x00" + strconv.FormatInt(it.Num, 10) + "\x00"))
	}
	if r.HoldSeconds > 0 { // only then, so the hashes of grabs without a hold stay as they were
		h.Write([]byte("hold\x00" + strconv.Itoa(r.HoldSeconds)))
	}
	if r.Channel != promo.NoChannel { // likewise: a resend on another channel is another body
		h.Write([]byte("channel\x00" + r.Channel.String()))
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// Outcome is the result field of the contract's GrabResult.
type Outcome string

const (
	Granted         Outcome = "GRANTED"
	SoldOut         Outcome = "SOLD_OUT"
	PinLimit        Outcome = "PIN_LIMIT"
	IPLimit         Outcome = "IP_LIMIT"
	NotStarted      Outcome = "NOT_STARTED"
	Ended           Outcome = "ENDED"
	Stopped         Outcome = "STOPPED"
	NotFound        Outcome = "NOT_FOUND"
	RateLimited     Outcome = "RATE_LIMITED"
	RequestIDReused Outcome = "REQUEST_ID_REUSED"
	Degraded        Outcome = "DEGRADED"
	Unavailable     Outcome = "UNAVAILABLE"
	Returned        Outcome = "RETURNED"
	AlreadyReturned Outcome = "ALREADY_RETURNED"
	Blocked         Outcome = "BLOCKED"   // the buyer's pin or ip is blocked by on-call
	Confirmed       Outcome = "CONFIRMED" // a held grant confirmed (holds.go)
	// ChannelNotAllowed: an item's promotion is not sold on the grab's channel
	// (q.lua decides, from the promotion hash).
	ChannelNotAllowed Outcome = "CHANNEL_NOT_ALLOWED"
	invalidNumOutcome Outcome = "INVALID_NUM" // num above maxPerGrab: a 400, never sent as a result
)

// Decision tells a grab's UNAVAILABLE apart (the contract's GrabResult.decision):
// what a retry with the same requestId can learn, which the message's words
// must not be made to carry.
type Decision string

const (
	// NothingTaken: this send took nothing; a retry with the same requestId may
	// be granted.
	NothingTaken Decision = "NOTHING_TAKEN"
	// Undecided: the requestId's outcome is not known yet (a send still being
	// committed or rolled back); a grant may stand: retry with the same requestId.
	Undecided Decision = "UNDECIDED"
	// RolledBack: the requestId was rolled back and holds nothing; every replay
	// answers the same, so another grab needs a new requestId.
	RolledBack Decision = "ROLLED_BACK"
)

// ItemResult is one item of an answer.
type ItemResult struct {
	PromoID   string `json:"promoId"`
	Type      int    `json:"type"`
	Num       int64  `json:"num"`
	Remaining *int64 `json:"remaining,omitempty"`
	// Amount is, for an item of an envelope pool, the sum of the parts it took
	// (GRANTED, a replay's too) or gave back (RETURNED).
	Amount *int64 `json:"amount,omitempty"`
}

// Result is the contract's GrabResult. Business refusals travel here, not as errors,
// so they never count as failures of the endpoint.
type Result struct {
	RequestID  string        `json:"requestId"`
	Result     Outcome       `json:"result"`
	Items      []ItemResult  `json:"items,omitempty"`
	FailedItem *int          `json:"failedItem,omitempty"`
	Message    string        `json:"message,omitempty"`
	Decision   Decision      `json:"decision,omitempty"` // with Unavailable only
	RetryAfter time.Duration `json:"-"`
}

// AppendJSON appends the result as encoding/json writes it from the tags above
// (FuzzResultJSON holds the two to the same bytes): every grab is answered with
// one, and reflection was a tenth of grab-service's CPU on sold-out answers.
func (r Result) AppendJSON(b []byte) []byte {
	b = append(b, `{"requestId":`...)
	b = jsonx.AppendString(b, r.RequestID)
	b = append(b, `,"result":`...)
	b = jsonx.AppendString(b, string(r.Result))
	if len(r.Items) > 0 {
		b = append(b, `,"items":[`...)
		for i, it := range r.Items {
			if i > 0 {
				b = append(b, ',')
			}
			b = flow.AppendItemHead(b, it.PromoID, it.Type, it.Num)
			if it.Remaining != nil {
				b = append(b, `,"remaining":`...)
				b = strconv.AppendInt(b, *it.Remaining, 10)
			}
			if it.Amount != nil {
				b = append(b, `,"amount":`...)
				b = strconv.AppendInt(b, *it.Amount, 10)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if r.FailedItem != nil {
		b = append(b, `,"failedItem":`...)
		b = strconv.AppendInt(b, int64(*r.FailedItem), 10)
	}
	if r.Message != "" {
		b = append(b, `,"message":`...)
		b = jsonx.AppendString(b, r.Message)
	}
	if r.Decision != "" {
		b = append(b, `,"decision":`...)
		b = jsonx.AppendString(b, string(r.Decision))
	}
	return append(b, '}')
}

func refusal(rid string, o Outcome, failed int, msg string) Result {
	return Result{RequestID: rid, Result: o, FailedItem: &failed, Message: msg}
}

// unavailable answers UNAVAILABLE with its decision; failed names the item when
// one did (nil otherwise).
func unavailable(rid string, d Decision, failed *int, msg string) Result {
	return Result{RequestID: rid, Result: Unavailable, FailedItem: failed, Message: msg, Decision: d}
}

// notTaken answers UNAVAILABLE for a send that took nothing, naming item failed.
func notTaken(rid string, failed int, msg string) Result {
	return unavailable(rid, NothingTaken, &failed, msg)
}

// IndexSilent answers a request whose resend the request index could not tell
// (fail closed: nothing passes a limit on a guess).
func IndexSilent(rid string) Result {
	return unavailable(rid, NothingTaken, nil,
		"the request index did not answer whether this requestId holds a grant; nothing was taken; retry with the same requestId")
}
