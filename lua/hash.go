package lua

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/jsonx"
	"github.com/flashsale/platform/internal/promo"
)

// HashState is a promotion hash as stored (field names in lua/README.md).
type HashState struct {
	Total, Remaining, PerPin, PerIP, MaxPerGrab int64
	RateLimit, RateWindowMs, WinCount, WinStart int64
	StartMs, EndMs                              int64
	State                                       string
	Ver                                         int64
	// Buckets is the bucket count of the promotion the hash is one of (field
	// buckets; 1 when absent: an ordinary promotion).
	Buckets int64
	// EnvAmount is an envelope pool's budget, the sum of its parts, and EnvLeft
	// the sum of those not handed out (fields envAmount, envLeft); both 0 for a
	// promotion that is no pool.
	EnvAmount, EnvLeft int64
	// EnvDigest is the pool's split fingerprint (field envDigest, EnvelopeDigest).
	EnvDigest string
	// Channels are the channels the promotion is sold on (field channels; 0 when
	// absent: every channel).
	Channels promo.Channels
}

// IsPool reports whether the hash is of an envelope pool.
func (h HashState) IsPool() bool { return h.EnvAmount > 0 }

// Granted is what the promotion has handed out, takes pending commit included.
func (h HashState) Granted() int64 { return h.Total - h.Remaining }

// ReadHash reads the promotion hash of key; ok is false when it does not exist.
func ReadHash(ctx context.Context, c redis.Cmdable, key string) (HashState, bool, error) {
	m, err := c.HGetAll(ctx, key).Result()
	if err != nil {
		return HashState{}, false, fmt.Errorf("read %s: %w", key, err)
	}
	if len(m) == 0 {
		return HashState{}, false, nil
	}
	h := HashState{State: m["state"], EnvDigest: m["envDigest"]}
	for name, dst := range map[string]*int64{
		"total": &h.Total, "remaining": &h.Remaining, "perPin": &h.PerPin, "perIp": &h.PerIP,
		"maxPerGrab": &h.MaxPerGrab, "rateLimit": &h.RateLimit, "rateWindowMs": &h.RateWindowMs,
		"winCount": &h.WinCount, "winStart": &h.WinStart, "startMs": &h.StartMs,
		"endMs": &h.EndMs, "ver": &h.Ver, "buckets": &h.Buckets,
		"envAmount": &h.EnvAmount, "envLeft": &h.EnvLeft,
	} {
		v, ok := m[name]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return HashState{}, true, fmt.Errorf("read %s: field %s: %w", key, name, err)
		}
		*dst = n
	}
	h.Buckets = max(h.Buckets, 1)
	if v, ok := m["channels"]; ok {
		n, err := strconv.ParseUint(v, 10, 8)
		if err != nil || !promo.Channels(n).Valid() {
			return HashState{}, true, fmt.Errorf("read %s: field channels %q is no channel bitmask", key, v)
		}
		h.Channels = promo.Channels(n)
	}
	return h, true, nil
}

// Ledger entry states (lua/README.md). A and C owe a CANCEL flow event and stay in
// the pending set with score 0; X and R are final.
const (
	LedgerPending       = "P" // taken, GRAB event not yet acknowledged
	LedgerCommitted     = "G" // GRAB event acknowledged
	LedgerAborted       = "A" // aborted: stock returned, a CANCEL (ROLLBACK) is owed
	LedgerAbortRecorded = "X" // aborted and its CANCEL acknowledged
	LedgerCancelled     = "C" // cancelled: stock returned, a CANCEL is owed
	LedgerReturned      = "R" // cancelled and its CANCEL acknowledged
)

// LedgerEntry is one request ledger value ({C_..}:req, field requestId), as q.lua and return.lua write it.
type LedgerEntry struct {
	State    string `json:"s"`
	BodyHash string `json:"h"`
	Num      int64  `json:"n"`
	Pin      string `json:"p"`
	IP       string `json:"i"`
	// IPKey is the field of {..}:ips the take counted (promo.IPKey), when it is
	// not IP (an IPv6 address counted by its prefix); a return releases it.
	IPKey      string `json:"j,omitempty"`
	DeadlineMs int64  `json:"d"`
	Reason     string `json:"r,omitempty"` // cancel reason (C, R; A, X when given)
	// Part is what a part of a bucketed grab took (q.lua's part letters); empty
	// for an ordinary item, which took stock, pin and ip alike.
	Part string `json:"k,omitempty"`
	// Amount and Parts: an envelope pool's take, the sum of its parts and the
	// parts themselves (EnvelopeParts: "<index>:<amount>,..."); empty otherwise.
	Amount int64  `json:"a,omitempty"`
	Parts  string `json:"e,omitempty"`
}

// Envelope is the entry's take of an envelope pool as indexes and their sum;
// the zero Envelope when it is no pool's.
func (e LedgerEntry) Envelope() (Envelope, error) {
	if e.Parts == "" {
		return Envelope{}, nil
	}
	out := Envelope{Amount: e.Amount}
	for _, m := range strings.Split(e.Parts, ",") {
		idx, _, err := ParseEnvelopeMember(m)
		if err != nil {
			return Envelope{}, err
		}
		out.Parts = append(out.Parts, idx)
	}
	return out, nil
}

// AppendJSON appends the entry as encoding/json would write it (the same object,
// field for field; '<', '>' and '&' are left unescaped, which JSON allows): the
// rebuild writes a million of these, and reflection was most of its time.
func (e LedgerEntry) AppendJSON(b []byte) []byte {
	b = append(b, `{"s":`...)
	b = jsonx.AppendString(b, e.State)
	b = append(b, `,"h":`...)
	b = jsonx.AppendString(b, e.BodyHash)
	b = append(b, `,"n":`...)
	b = strconv.AppendInt(b, e.Num, 10)
	b = append(b, `,"p":`...)
	b = jsonx.AppendString(b, e.Pin)
	b = append(b, `,"i":`...)
	b = jsonx.AppendString(b, e.IP)
	if e.IPKey != "" {
		b = append(b, `,"j":`...)
		b = jsonx.AppendString(b, e.IPKey)
	}
	b = append(b, `,"d":`...)
	b = strconv.AppendInt(b, e.DeadlineMs, 10)
	if e.Reason != "" {
		b = append(b, `,"r":`...)
		b = jsonx.AppendString(b, e.Reason)
	}
	if e.Part != "" {
		b = append(b, `,"k":`...)
		b = jsonx.AppendString(b, e.Part)
	}
	if e.Amount != 0 {
		b = append(b, `,"a":`...)
		b = strconv.AppendInt(b, e.Amount, 10)
	}
	if e.Parts != "" {
		b = append(b, `,"e":`...)
		b = jsonx.AppendString(b, e.Parts)
	}
	return append(b, '}')
}

// ReadLedger reads requestID's ledger entry for the promotion of key (promo.Key);
// ok is false when there is none.
func ReadLedger(ctx context.Context, c redis.Cmdable, key, requestID string) (LedgerEntry, bool, error) {
	raw, err := c.HGet(ctx, promo.LedgerKey(key), requestID).Result()
	if errors.Is(err, redis.Nil) {
		return LedgerEntry{}, false, nil
	}
	if err != nil {
		return LedgerEntry{}, false, fmt.Errorf("read ledger %s %s: %w", key, requestID, err)
	}
	var e LedgerEntry
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return LedgerEntry{}, true, fmt.Errorf("read ledger %s %s: %w", key, requestID, err)
	}
	return e, true, nil
}
