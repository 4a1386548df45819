// Package flow is the schema of the flow events on Kafka topic promo-grab-flow
// (docs/CONTRACT.md, "Flow events"), shared by grab-service and the flow sink.
package flow

import (
	"encoding/json"
	"fmt"
	"time"
)

// Topic is the contract's Kafka topic.
const Topic = "promo-grab-flow"

// Kind is the state change an event records.
type Kind string

const (
	Grab   Kind = "GRAB"   // qualification granted
	Cancel Kind = "CANCEL" // qualification returned (cancel, or rollback of an unacknowledged grab)
	// Confirm: a held grant was confirmed (paid): its hold is lifted for good. It
	// moves no stock; the record keeps it so a rebuilt shard restores only the holds
	// still open.
	Confirm Kind = "CONFIRM"
)

// TimeFormat is RFC 3339 in UTC with milliseconds, as the contract asks.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Item is one promotion of a request.
type Item struct {
	PromoID string `json:"promoId"`
	Type    int    `json:"type"`
	Num     int64  `json:"num"`
	Shard   int    `json:"shard"`
	// Bucket and Buckets: the item's promotion is split into Buckets buckets
	// (internal/bucket) and the units came from bucket Bucket, which lives on Shard.
	// Both are left out for an ordinary promotion (one bucket).
	Bucket  int `json:"bucket,omitempty"`
	Buckets int `json:"buckets,omitempty"`
	// NoIP: the grab of a bucketed item counted its ip nowhere (its promotion had
	// no ip limit; q.lua's part letter n), so its parts are the stock bucket's and
	// the pin's home's alone. Left out otherwise.
	NoIP bool `json:"noIp,omitempty"`
	// Amount and Parts: the item is of an envelope pool, and took (GRAB) or gave
	// back (CANCEL) the pool's parts Parts (their indexes, Num of them), worth
	// Amount in all. Both are left out for an item of no pool.
	Amount int64 `json:"amount,omitempty"`
	Parts  []int `json:"parts,omitempty"`
}

// Event is one flow event. Its Kafka message key is the requestId, so every event
// of one request lands in one partition, in order.
type Event struct {
	EventID    string `json:"eventId"`
	Kind       Kind   `json:"kind"`
	RequestID  string `json:"requestId"`
	Pin        string `json:"pin"`
	IP         string `json:"ip"`
	Items      []Item `json:"items"`
	OccurredAt string `json:"occurredAt"`
	// Reason says why a CANCEL happened (USER_CANCELLED, ..., ROLLBACK); optional.
	Reason string `json:"reason,omitempty"`
	// BodyHash is the grab request's body fingerprint, as the request ledger keeps it
	// (GRAB events). The record stores it so a rebuilt ledger tells a replay from a
	// reused requestId exactly as the lost one did; optional for older producers.
	BodyHash string `json:"bodyHash,omitempty"`
	// HoldUntil is when a held grant stops holding (unix ms; GRAB events of a grab
	// with holdSeconds): unless a CONFIRM of the request comes first, the platform
	// returns it then. Left out for a grant without a hold.
	HoldUntil int64 `json:"holdUntil,omitempty"`
	// Channel is the sales channel the grab came through (APP, WECHAT, QQ, WEB;
	// promo.Channel): set on the GRAB of a grab that named one, left out otherwise
	// (a CANCEL or CONFIRM names the channel through its request's GRAB).
	Channel string `json:"channel,omitempty"`
}

// MaxHoldSpan bounds a GRAB's holdUntil after its occurredAt: a hold lasts at most
// a day (grab-service's MaxHoldSeconds) past its claim, and the claim follows the
// grab's start by at most its answer time.
const MaxHoldSpan = 25 * time.Hour

// Stamp formats t as the contract's occurredAt.
func Stamp(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Decode parses and checks one event; the flow sink sends what fails to the dead-letter topic.
func Decode(b []byte) (Event, error) {
	var e Event
	if !decodeJSON(b, &e) { // not in the producers' shape: encoding/json says what it is
		e = Event{}
		if err := json.Unmarshal(b, &e); err != nil {
			return e, fmt.Errorf("decode flow event: %w", err)
		}
	}
	if e.EventID == "" || e.RequestID == "" || len(e.Items) == 0 {
		return e, fmt.Errorf("decode flow event %q: eventId, requestId and items are required", e.EventID)
	}
	if e.Kind != Grab && e.Kind != Cancel && e.Kind != Confirm {
		return e, fmt.Errorf("decode flow event %q: unknown kind %q", e.EventID, e.Kind)
	}
	if _, err := time.Parse(time.RFC3339, e.OccurredAt); err != nil {
		return e, fmt.Errorf("decode flow event %q: occurredAt: %w", e.EventID, err)
	}
	for i, it := range e.Items {
		if it.PromoID == "" || it.Num <= 0 {
			return e, fmt.Errorf("decode flow event %q: item %d: promoId and a positive num are required", e.EventID, i)
		}
	}
	if err := e.validate(); err != nil {
		return e, fmt.Errorf("decode flow event %q: %w", e.EventID, err)
	}
	return e, nil
}

// RequestIndex is the request index entry of one requestId (Redis key
// promo.RequestIndexKey, on the shard the ring gives that key): written by
// grab-service's claim before any take, restored from the record's GRAB rows by the
// rebuild. It refuses a requestId reused with another body, tells the sold-out
// short-circuit that a requestId may hold a grant, and tells a cancel where the
// request's items live.
type RequestIndex struct {
	BodyHash string `json:"h"`
	Pin      string `json:"pin"`
	IP       string `json:"ip"`
	Items    []Item `json:"items"`
	// ClaimedMs is when grab-service claimed the requestId (unix ms): a later send of
	// it that finds no take may be racing the first one still in flight. A rebuilt
	// entry has none (0), its grab long over.
	ClaimedMs int64 `json:"at,omitempty"`
	// HoldUntilMs is the hold's deadline (unix ms) of a grab with holdSeconds, as
	// the claim registered it; 0 without a hold. A confirm reads it to know the grant
	// was held; a rebuilt entry carries it from the record.
	HoldUntilMs int64 `json:"hu,omitempty"`
}

// RequestIndexTTL is how long an index entry lives after its claim.
const RequestIndexTTL = 30 * 24 * time.Hour
