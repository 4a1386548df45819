package admintransport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/promo-admin/internal/adminendpoint"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
)

// The decoders check the shape of a request: JSON types, unknown fields, required
// fields, times. The service checks the values (ranges, patterns, order of times).
// Absent optional fields take the contract's defaults here, so that the service can
// tell a given 0 (invalid) from an absent field.

const (
	defaultMaxPerGrab    = 1
	defaultWindowSeconds = 60
	defaultBuckets       = 1
)

type rateLimitBody struct {
	Limit         *int64 `json:"limit"`
	WindowSeconds *int64 `json:"windowSeconds"`
}

func (b *rateLimitBody) model() (*promo.RateLimit, error) {
	if b == nil {
		return nil, nil
	}
	if b.Limit == nil {
		return nil, httpx.Invalid("rateLimit.limit", "is required")
	}
	rl := &promo.RateLimit{Limit: *b.Limit, WindowSeconds: defaultWindowSeconds}
	if b.WindowSeconds != nil {
		rl.WindowSeconds = *b.WindowSeconds
	}
	return rl, nil
}

type createBody struct {
	PromoID     *string        `json:"promoId"`
	Type        *int           `json:"type"`
	Title       *string        `json:"title"`
	Total       *int64         `json:"total"`
	PerPinLimit *int64         `json:"perPinLimit"`
	PerIPLimit  *int64         `json:"perIpLimit"`
	MaxPerGrab  *int64         `json:"maxPerGrab"`
	RateLimit   *rateLimitBody `json:"rateLimit"`
	StartAt     *string        `json:"startAt"`
	EndAt       *string        `json:"endAt"`
	Buckets     *int           `json:"buckets"`
	// Envelope is decoded on its own (envelopeModel) so that its errors name
	// envelope.<field>.
	Envelope json.RawMessage `json:"envelope"`
	// Channels likewise (channelsModel): its errors name channels[i].
	Channels json.RawMessage `json:"channels"`
}

// channelsModel reads a channel list: absent is (every channel, false); [] is
// every channel named; anything but a list of the contract's names, each at most
// once, is a 400 naming channels or channels[i].
func channelsModel(raw json.RawMessage) (promo.Channels, bool, error) {
	if raw == nil {
		return promo.EveryChannel, false, nil
	}
	listErr := httpx.Invalid("channels", "must be a list of "+promo.ChannelNamesText+" ([] = every channel)")
	var elems []json.RawMessage
	if strings.TrimSpace(string(raw)) == "null" || json.Unmarshal(raw, &elems) != nil {
		return 0, false, listErr
	}
	names := make([]string, len(elems))
	for i, el := range elems {
		if json.Unmarshal(el, &names[i]) != nil {
			return 0, false, httpx.Invalid(fmt.Sprintf("channels[%d]", i), "must be one of "+promo.ChannelNamesText)
		}
	}
	cs, err := promo.ParseChannelList(names)
	var le *promo.ChannelListError
	if errors.As(err, &le) {
		return 0, false, httpx.Invalid(fmt.Sprintf("channels[%d]", le.Index), le.Msg)
	}
	return cs, true, err
}

// envelopeBody is a create's envelope: a closed object (remainingAmount is shown,
// never set).
type envelopeBody struct {
	Amount    *int64 `json:"amount"`
	MinAmount *int64 `json:"minAmount"`
}

// envelopeModel reads a create's envelope; nil when absent.
func envelopeModel(raw json.RawMessage) (*promo.Envelope, error) {
	if raw == nil {
		return nil, nil
	}
	var b envelopeBody
	if strings.TrimSpace(string(raw)) == "null" {
		return nil, httpx.Invalid("envelope", "must be a JSON object with amount and minAmount")
	}
	if err := httpx.DecodeBytes(raw, &b, false); err != nil {
		var he *httpx.Error
		if errors.As(err, &he) {
			field := "envelope"
			if he.Field != "" {
				field += "." + he.Field
			}
			if he.Field == "" && strings.Contains(he.Message, "JSON object") {
				return nil, httpx.Invalid(field, "must be a JSON object with amount and minAmount")
			}
			return nil, httpx.Invalid(field, he.Message)
		}
		return nil, err
	}
	if b.Amount == nil {
		return nil, httpx.Invalid("envelope.amount", "is required")
	}
	if b.MinAmount == nil {
		return nil, httpx.Invalid("envelope.minAmount", "is required")
	}
	return &promo.Envelope{Amount: *b.Amount, MinAmount: *b.MinAmount}, nil
}

func decodeCreate(_ context.Context, r *http.Request) (interface{}, error) {
	var b createBody
	if err := httpx.DecodeJSON(nil, r, &b, false); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name    string
		present bool
	}{
		{"promoId", b.PromoID != nil}, {"type", b.Type != nil}, {"total", b.Total != nil},
		{"startAt", b.StartAt != nil}, {"endAt", b.EndAt != nil},
	} {
		if !f.present {
			return nil, httpx.Invalid(f.name, "is required")
		}
	}
	s := promo.Spec{PromoID: *b.PromoID, Type: *b.Type, Total: *b.Total, MaxPerGrab: defaultMaxPerGrab, Buckets: defaultBuckets}
	if b.Title != nil {
		s.Title = *b.Title
	}
	if b.PerPinLimit != nil {
		s.PerPinLimit = *b.PerPinLimit
	}
	if b.PerIPLimit != nil {
		s.PerIPLimit = *b.PerIPLimit
	}
	if b.MaxPerGrab != nil {
		s.MaxPerGrab = *b.MaxPerGrab
	}
	if b.Buckets != nil {
		s.Buckets = *b.Buckets
	}
	var err error
	if s.RateLimit, err = b.RateLimit.model(); err != nil {
		return nil, err
	}
	if s.Envelope, err = envelopeModel(b.Envelope); err != nil {
		return nil, err
	}
	if s.Channels, _, err = channelsModel(b.Channels); err != nil {
		return nil, err
	}
	if s.StartAt, err = parseTime("startAt", *b.StartAt); err != nil {
		return nil, err
	}
	if s.EndAt, err = parseTime("endAt", *b.EndAt); err != nil {
		return nil, err
	}
	return adminendpoint.CreateRequest{Spec: s}, nil
}

type patchBody struct {
	Total       *int64         `json:"total"`
	PerPinLimit *int64         `json:"perPinLimit"`
	PerIPLimit  *int64         `json:"perIpLimit"`
	RateLimit   *rateLimitBody `json:"rateLimit"`
	EndAt       *string        `json:"endAt"`
	// Buckets is fixed at create; the service refuses any other count than the promotion's.
	Buckets *int `json:"buckets"`
	// Channels: absent leaves them, [] is every channel again (channelsModel).
	Channels json.RawMessage `json:"channels"`
}

func decodePatch(_ context.Context, r *http.Request) (interface{}, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var b patchBody
	if err := httpx.DecodeJSON(nil, r, &b, false); err != nil {
		return nil, err
	}
	p := adminservice.Patch{Total: b.Total, PerPinLimit: b.PerPinLimit, PerIPLimit: b.PerIPLimit, Buckets: b.Buckets}
	if p.RateLimit, err = b.RateLimit.model(); err != nil {
		return nil, err
	}
	if cs, present, err := channelsModel(b.Channels); err != nil {
		return nil, err
	} else if present {
		p.Channels = &cs
	}
	if b.EndAt != nil {
		end, err := parseTime("endAt", *b.EndAt)
		if err != nil {
			return nil, err
		}
		p.EndAt = &end
	}
	return adminendpoint.PatchRequest{ID: id, Patch: p}, nil
}

type stopBody struct {
	Reason *string `json:"reason"`
}

func decodeStop(_ context.Context, r *http.Request) (interface{}, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var b stopBody
	if err := httpx.DecodeJSON(nil, r, &b, true); err != nil {
		return nil, err
	}
	req := adminendpoint.StopRequest{ID: id}
	if b.Reason != nil {
		req.Reason = *b.Reason
	}
	return req, nil
}

func decodeGet(_ context.Context, r *http.Request) (interface{}, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	return adminendpoint.GetRequest{ID: id}, nil
}

func decodeHistory(_ context.Context, r *http.Request) (interface{}, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	return adminendpoint.HistoryRequest{ID: id}, nil
}

func decodeDelete(_ context.Context, r *http.Request) (interface{}, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	return adminendpoint.DeleteRequest{ID: id}, nil
}

func decodeList(_ context.Context, r *http.Request) (interface{}, error) {
	q := r.URL.Query()
	lq := adminservice.ListQuery{State: q.Get("state"), Cursor: q.Get("cursor"), Limit: store.DefaultListLimit}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil {
			return nil, httpx.Invalid("limit", "must be an integer from 1 to 500")
		}
		lq.Limit = n
	}
	if q.Has("state") && lq.State == "" {
		return nil, httpx.Invalid("state", "must be one of SCHEDULED, ACTIVE, SOLD_OUT, ENDED, STOPPED, DELETED")
	}
	if q.Has("cursor") && lq.Cursor == "" {
		return nil, httpx.Invalid("cursor", "must not be empty")
	}
	return adminendpoint.ListRequest{Query: lq}, nil
}

// pathID reads {promoId} and {type}; the service checks their values.
func pathID(r *http.Request) (store.ID, error) {
	t, err := strconv.Atoi(r.PathValue("type"))
	if err != nil {
		return store.ID{}, httpx.Invalid("type", "must be an integer from 1 to 99")
	}
	return store.ID{PromoID: r.PathValue("promoId"), Type: t}, nil
}

func parseTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, httpx.Invalid(field, "must be an RFC 3339 date-time such as 2026-06-18T00:00:00+08:00")
	}
	return t.UTC(), nil
}
