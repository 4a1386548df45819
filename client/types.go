package client

import "time"

// Result is a GrabResult's result (api/openapi.yaml, GrabResult.result): what a
// grab, cancel or confirm was answered.
type Result string

// The results of api/openapi.yaml's GrabResult.
const (
	ResultGranted         Result = "GRANTED"           // grab: 200
	ResultSoldOut         Result = "SOLD_OUT"          // grab: 409
	ResultPinLimit        Result = "PIN_LIMIT"         // grab: 409
	ResultIPLimit         Result = "IP_LIMIT"          // grab: 409
	ResultNotStarted      Result = "NOT_STARTED"       // grab: 409
	ResultEnded           Result = "ENDED"             // grab: 409
	ResultStopped         Result = "STOPPED"           // grab: 409 (stopped, or blocked by on-call)
	ResultNotFound        Result = "NOT_FOUND"         // grab: 409
	ResultRateLimited     Result = "RATE_LIMITED"      // grab, cancel, confirm: 429
	ResultRequestIDReused Result = "REQUEST_ID_REUSED" // grab: 409 (the requestId was sent with another body)
	ResultDegraded        Result = "DEGRADED"          // grab: 503 (grabs switched off by on-call)
	ResultUnavailable     Result = "UNAVAILABLE"       // grab, cancel, confirm: 503
	ResultReturned        Result = "RETURNED"          // cancel: 200
	ResultAlreadyReturned Result = "ALREADY_RETURNED"  // cancel: 200; grab replay and confirm: 409
	ResultBlocked         Result = "BLOCKED"           // grab: 403 (the buyer's pin or ip is blocked)
	ResultConfirmed       Result = "CONFIRMED"         // confirm: 200
	// ResultChannelNotAllowed: grab, 409: an item's promotion is not sold on the
	// grab's Channel (or the grab named none and the promotion has channels).
	ResultChannelNotAllowed Result = "CHANNEL_NOT_ALLOWED"
)

// Channel is a sales channel (api/openapi.yaml, Channel).
type Channel string

// Decision is a grab's UNAVAILABLE told apart (api/openapi.yaml,
// GrabResult.decision): what a retry with the same requestId can learn.
type Decision string

const (
	DecisionNothingTaken Decision = "NOTHING_TAKEN" // this send took nothing; the same requestId may be retried
	DecisionUndecided    Decision = "UNDECIDED"     // the outcome is not known yet; a grant may stand
	DecisionRolledBack   Decision = "ROLLED_BACK"   // the requestId holds nothing; a new grab needs a new requestId
)

// The channels of api/openapi.yaml's Channel.
const (
	ChannelApp    Channel = "APP" // the mobile app
	ChannelWeChat Channel = "WECHAT"
	ChannelQQ     Channel = "QQ"
	ChannelWeb    Channel = "WEB" // the main site
)

// Code is an Error's code (api/openapi.yaml, Error.code): why a request was not
// served at all.
type Code string

// The codes of api/openapi.yaml's Error.
const (
	CodeInvalidRequest   Code = "INVALID_REQUEST"
	CodePayloadTooLarge  Code = "PAYLOAD_TOO_LARGE"
	CodeUnauthorized     Code = "UNAUTHORIZED"
	CodeForbidden        Code = "FORBIDDEN"
	CodeNotFound         Code = "NOT_FOUND"
	CodeMethodNotAllowed Code = "METHOD_NOT_ALLOWED"
	CodeAlreadyExists    Code = "ALREADY_EXISTS"
	CodeBusy             Code = "BUSY"
	CodeBelowGranted     Code = "BELOW_GRANTED"
	CodeStopped          Code = "STOPPED"
	CodeEnvelopeFixed    Code = "ENVELOPE_FIXED"
	CodeSwitchesChanged  Code = "SWITCHES_CHANGED"
	CodeRateLimited      Code = "RATE_LIMITED"
	CodeUnavailable      Code = "UNAVAILABLE"
	CodeInternal         Code = "INTERNAL"
)

// State is a promotion's state (api/openapi.yaml, State).
type State string

// The states of api/openapi.yaml's State.
const (
	StateScheduled State = "SCHEDULED"
	StateActive    State = "ACTIVE"
	StateSoldOut   State = "SOLD_OUT"
	StateEnded     State = "ENDED"
	StateStopped   State = "STOPPED"
	StateDeleted   State = "DELETED"
)

// CancelReason is why a grant is cancelled (the cancel body's reason).
type CancelReason string

// The reasons of the cancel body; an empty reason is sent as none (USER_CANCELLED).
const (
	ReasonUserCancelled  CancelReason = "USER_CANCELLED"
	ReasonPaymentExpired CancelReason = "PAYMENT_EXPIRED"
	ReasonStockShort     CancelReason = "STOCK_SHORT"
	ReasonOther          CancelReason = "OTHER"
)

// Item is one promotion of a grab and the units it asks for.
type Item struct {
	PromoID string `json:"promoId"`
	Type    int    `json:"type"`
	Num     int64  `json:"num"`
}

// GrabRequest is the body of POST /v1/grab. Its requestId is the grab's identity:
// every retry sends the same body, byte for byte, under it.
type GrabRequest struct {
	RequestID   string `json:"requestId"`
	Pin         string `json:"pin"`
	IP          string `json:"ip"`
	Items       []Item `json:"items"`
	HoldSeconds int    `json:"holdSeconds,omitempty"`
	// Channel is the sales channel the grab comes through; empty names none,
	// which only promotions sold on every channel take. Part of the body.
	Channel Channel `json:"channel,omitempty"`

	// Resend says this requestId may have been sent before (by an earlier Grab
	// call, another process, before a crash): the first send is then numbered as
	// a retry (X-Grab-Attempt 2), so that grab-service looks the requestId up and
	// answers a grant it already holds GRANTED rather than, say, SOLD_OUT. Leave
	// it false only for a requestId never sent. It is not part of the body.
	Resend bool `json:"-"`
}

// WithRequestIDBeside returns r with its requestId derived beside its first item's
// promotion (RequestIDBeside): a grab of promotions on one shard is then claimed
// in the take's own script call, one round trip to another shard fewer
// (docs/CONTRACT.md, "A requestId beside its promotion"). Cancel and confirm the
// grant with the derived requestId (the answer's RequestID). The derivation is a
// function of the requestId and the promotion alone, so a retry derives the same.
func (r GrabRequest) WithRequestIDBeside() GrabRequest {
	if len(r.Items) > 0 {
		r.RequestID = RequestIDBeside(r.RequestID, r.Items[0].PromoID, r.Items[0].Type)
	}
	return r
}

// WithRequestIDBesideBucket is WithRequestIDBeside for a first item of a
// promotion in buckets buckets (RequestIDBesideBucket): beside the pin's home
// bucket, where a grab of r.Pin is taken first.
func (r GrabRequest) WithRequestIDBesideBucket(buckets int) GrabRequest {
	if len(r.Items) > 0 {
		r.RequestID = RequestIDBesideBucket(r.RequestID, r.Items[0].PromoID, r.Items[0].Type, buckets, r.Pin)
	}
	return r
}

// AnswerItem is one item of an answer: granted or returned.
type AnswerItem struct {
	PromoID string `json:"promoId"`
	Type    int    `json:"type"`
	Num     int64  `json:"num"`
	// Remaining is the promotion's (of a promotion in buckets: the bucket's) stock
	// after the take; on a first GRANTED only, absent from a replay's answer.
	Remaining *int64 `json:"remaining,omitempty"`
	// Amount is, of an envelope pool, the sum of the envelopes taken (GRANTED) or
	// given back (RETURNED).
	Amount *int64 `json:"amount,omitempty"`
}

// Answer is a GrabResult that a call succeeded with: GRANTED for a grab, RETURNED
// or ALREADY_RETURNED for a cancel, CONFIRMED for a confirm.
type Answer struct {
	RequestID string       `json:"requestId"`
	Result    Result       `json:"result"`
	Items     []AnswerItem `json:"items,omitempty"`
	Message   string       `json:"message,omitempty"`

	// Attempts is how many sends the call took (1 when the first was answered).
	Attempts int `json:"-"`
}

// PromotionStatus is the public, cacheable status of a promotion (GET .../status).
type PromotionStatus struct {
	PromoID   string `json:"promoId"`
	Type      int    `json:"type"`
	State     State  `json:"state"`
	Remaining int64  `json:"remaining"`
	// RemainingAmount is, of an envelope pool, the sum of the envelopes not handed out.
	RemainingAmount *int64    `json:"remainingAmount,omitempty"`
	StartAt         time.Time `json:"startAt"`
	EndAt           time.Time `json:"endAt"`
	// Channels are the channels it is sold on; nil: every channel.
	Channels []Channel `json:"channels,omitempty"`
}

// RateLimit is a promotion's grab attempts allowed per window.
type RateLimit struct {
	Limit         int64 `json:"limit"`
	WindowSeconds int   `json:"windowSeconds,omitempty"` // 0: the service's default, 60
}

// EnvelopeSpec makes a promotion an envelope pool (docs/CONTRACT.md, "Envelope pools").
type EnvelopeSpec struct {
	Amount    int64 `json:"amount"`
	MinAmount int64 `json:"minAmount"`
}

// PromotionSpec is the body of POST /v1/promotions. Zero optional fields are left
// out, and take the service's defaults (no limits, maxPerGrab 1, one bucket).
type PromotionSpec struct {
	PromoID     string        `json:"promoId"`
	Type        int           `json:"type"`
	Title       string        `json:"title,omitempty"`
	Total       int64         `json:"total"`
	PerPinLimit int64         `json:"perPinLimit,omitempty"`
	PerIPLimit  int64         `json:"perIpLimit,omitempty"`
	MaxPerGrab  int64         `json:"maxPerGrab,omitempty"`
	RateLimit   *RateLimit    `json:"rateLimit,omitempty"`
	StartAt     time.Time     `json:"startAt"`
	EndAt       time.Time     `json:"endAt"`
	Buckets     int           `json:"buckets,omitempty"`
	Envelope    *EnvelopeSpec `json:"envelope,omitempty"`
	// Channels are the channels it is sold on, each at most once; none: every channel.
	Channels []Channel `json:"channels,omitempty"`
}

// PromotionPatch is the body of PATCH /v1/promotions/{promoId}/{type}: the fields
// set are changed, the others left as they are. At least one must be set.
type PromotionPatch struct {
	Total       *int64     `json:"total,omitempty"`
	PerPinLimit *int64     `json:"perPinLimit,omitempty"`
	PerIPLimit  *int64     `json:"perIpLimit,omitempty"`
	RateLimit   *RateLimit `json:"rateLimit,omitempty"` // replaces the promotion's as a whole
	EndAt       *time.Time `json:"endAt,omitempty"`
	// Channels, when set, are the channels sold on from now; a set empty list is
	// every channel again (EveryChannel).
	Channels *[]Channel `json:"channels,omitempty"`
}

// EveryChannel is a PromotionPatch's Channels that sells on every channel again.
func EveryChannel() *[]Channel { return &[]Channel{} }

// EnvelopeView is an envelope pool as it stands.
type EnvelopeView struct {
	Amount          int64 `json:"amount"`
	MinAmount       int64 `json:"minAmount"`
	RemainingAmount int64 `json:"remainingAmount"`
}

// Promotion is a promotion as promo-admin stores it, with its state and counters.
type Promotion struct {
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
	Key         string     `json:"key"`   // the Redis hash key, C_<promoId>_<type>
	Shard       int        `json:"shard"` // its logical shard
	State       State      `json:"state"`
	Remaining   int64      `json:"remaining"`
	Granted     int64      `json:"granted"` // taken and not returned
	// Buckets, BucketShards and BucketRemaining are set for a promotion in
	// buckets (docs/CONTRACT.md, "Buckets"); BucketRemaining not in a list.
	Buckets         int           `json:"buckets,omitempty"`
	BucketShards    []int         `json:"bucketShards,omitempty"`
	BucketRemaining []int64       `json:"bucketRemaining,omitempty"`
	Envelope        *EnvelopeView `json:"envelope,omitempty"`
	// Channels are the channels it is sold on; nil: every channel.
	Channels  []Channel `json:"channels,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// PromotionPage is one page of GET /v1/promotions, newest first.
type PromotionPage struct {
	Items      []Promotion `json:"items"`
	NextCursor string      `json:"nextCursor,omitempty"` // empty on the last page
}

// ListOptions narrow GET /v1/promotions; zero fields are left out.
type ListOptions struct {
	State  State  // deleted promotions are listed only when State is StateDeleted
	Limit  int    // 1..500; the service's default is 50
	Cursor string // the NextCursor of the page before
}
