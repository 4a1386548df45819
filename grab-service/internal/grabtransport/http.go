// Package grabtransport serves the grab endpoints over HTTP/JSON per api/openapi.yaml:
// strict decoding, one error encoder, and the contract's status codes.
package grabtransport

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"

	kithttp "github.com/go-kit/kit/transport/http"

	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/grab-service/internal/grabendpoint"
	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/internal/promo"
)

// MaxItems is the contract's cap on items per grab.
const MaxItems = promo.MaxItemsPerGrab

// Handler mounts the grab routes on mux behind the checkout role, and the
// contract they follow at GET /openapi.yaml.
func Handler(mux *http.ServeMux, set grabendpoint.Set, tokens httpx.Tokens, m *httpx.RouteMetrics) {
	opts := []kithttp.ServerOption{kithttp.ServerErrorEncoder(encodeError)}
	route := func(pattern, name string, h http.Handler) {
		mux.Handle(pattern, m.Wrap(name, h))
	}
	route("POST /v1/grab", "grab", tokens.Require(kithttp.NewServer(set.Grab, decodeGrab, encodeGrab, opts...), httpx.RoleCheckout))
	route("POST /v1/grab/{requestId}/cancel", "cancel", tokens.Require(kithttp.NewServer(set.Cancel, decodeCancel, encodeResult, opts...), httpx.RoleCheckout))
	route("POST /v1/grab/{requestId}/confirm", "confirm", tokens.Require(kithttp.NewServer(set.Confirm, decodeConfirm, encodeConfirm, opts...), httpx.RoleCheckout))
	route("GET /v1/promotions/{promoId}/{type}/status", "status", kithttp.NewServer(set.Status, decodeStatus, encodeStatus, opts...))
	httpx.ServeSpec(mux)
}

type wireItem struct {
	PromoID *string `json:"promoId"`
	Type    *int    `json:"type"`
	Num     *int64  `json:"num"`
}

type wireGrab struct {
	RequestID *string `json:"requestId"`
	Pin       *string `json:"pin"`
	IP        *string `json:"ip"`
	// HoldSeconds, when present, is how long the grant waits for its confirm.
	HoldSeconds *int64 `json:"holdSeconds"`
	// Channel, when present, is the sales channel the grab comes through.
	Channel *string `json:"channel"`
	// Items are decoded one by one so an error can name its index (items[3].num).
	Items []json.RawMessage `json:"items"`
}

// AttemptHeader carries the checkout service's attempt number for the grab's
// requestId: 1 for the first send, 2 and up for retries. It is optional; 1 lets a
// refusal known locally (SOLD_OUT, say) be answered without looking the requestId
// up (grab.Request.FirstAttempt).
const AttemptHeader = "X-Grab-Attempt"

func decodeGrab(_ context.Context, r *http.Request) (any, error) {
	first, err := firstAttempt(r.Header.Get(AttemptHeader))
	if err != nil {
		return nil, err
	}
	body, err := httpx.ReadBody(nil, r)
	if err != nil {
		return nil, err
	}
	req, err := DecodeGrabBody(body)
	req.FirstAttempt = first
	return req, err
}

// firstAttempt reads the attempt header: absent is "not known to be the first".
func firstAttempt(v string) (bool, error) {
	if v == "" {
		return false, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxAttempt {
		return false, httpx.Invalid(AttemptHeader, "must be the attempt number of this requestId: 1 for the first send, 2 and up for retries")
	}
	return n == 1, nil
}

// maxAttempt bounds the attempt header to a sane number.
const maxAttempt = 1_000_000

// DecodeGrabBody parses and validates a grab body (the fuzz target's entry point).
// A plain body (the checkout service's, every time) takes the one-pass scanner
// of fastgrab.go; anything else, malformed or merely unusual, the strict general
// decoder, which names what is wrong.
func DecodeGrabBody(body []byte) (grab.Request, error) {
	if w, items, ok := scanGrab(body); ok {
		return parseGrab(w, len(items), func(i int) (wireItem, error) { return items[i], nil })
	}
	return decodeGrabStrict(body)
}

// decodeGrabStrict is the general decoder: strict JSON (httpx.DecodeBytes), then
// ParseGrab.
func decodeGrabStrict(body []byte) (grab.Request, error) {
	var w wireGrab
	if err := httpx.DecodeBytes(body, &w, false); err != nil {
		return grab.Request{}, err
	}
	return ParseGrab(w)
}

// ParseGrab validates a decoded grab body, naming the first offending field.
func ParseGrab(w wireGrab) (grab.Request, error) {
	return parseGrab(w, len(w.Items), func(i int) (wireItem, error) {
		var it wireItem
		if err := httpx.DecodeBytes(w.Items[i], &it, false); err != nil {
			var e *httpx.Error
			if errors.As(err, &e) {
				at := fmt.Sprintf("items[%d]", i)
				if e.Field != "" {
					at += "." + e.Field
				}
				return it, httpx.Invalid(at, e.Message)
			}
			return it, err
		}
		return it, nil
	})
}

// canonicalIP is ip unmapped, as text: the text it was parsed from when that is
// already the canonical form (the usual dotted IPv4), without a string of its own.
func canonicalIP(text string, ip netip.Addr) string {
	var buf [64]byte
	canon := ip.Unmap().AppendTo(buf[:0])
	if string(canon) == text {
		return text
	}
	return string(canon)
}

// parseGrab validates the top-level fields of w (its Items only for presence),
// then each of the n items item(i) yields, in order.
func parseGrab(w wireGrab, n int, item func(i int) (wireItem, error)) (grab.Request, error) {
	var req grab.Request
	switch {
	case w.RequestID == nil:
		return req, httpx.Invalid("requestId", "required")
	case !promo.ValidRequestID(*w.RequestID):
		return req, httpx.Invalid("requestId", "must match ^[A-Za-z0-9._:-]{1,128}$")
	case w.Pin == nil:
		return req, httpx.Invalid("pin", "required")
	case !promo.ValidPin(*w.Pin):
		return req, httpx.Invalid("pin", "1 to 128 printable characters, no whitespace")
	case w.IP == nil:
		return req, httpx.Invalid("ip", "required")
	case w.Items == nil:
		return req, httpx.Invalid("items", "required")
	case n == 0 || n > MaxItems:
		return req, httpx.Invalid("items", fmt.Sprintf("between 1 and %d items", MaxItems))
	case w.HoldSeconds != nil && (*w.HoldSeconds < 1 || *w.HoldSeconds > grab.MaxHoldSeconds):
		return req, httpx.Invalid("holdSeconds", fmt.Sprintf("must be 1..%d", grab.MaxHoldSeconds))
	}
	ip, err := netip.ParseAddr(*w.IP)
	if err != nil || ip.Zone() != "" {
		return req, httpx.Invalid("ip", "must be an IPv4 or IPv6 address")
	}
	req = grab.Request{RequestID: *w.RequestID, Pin: *w.Pin, IP: canonicalIP(*w.IP, ip), Items: make([]grab.Item, 0, n)}
	if w.HoldSeconds != nil {
		req.HoldSeconds = int(*w.HoldSeconds)
	}
	if w.Channel != nil {
		c, ok := promo.ParseChannel(*w.Channel)
		if !ok {
			return req, httpx.Invalid("channel", "must be one of "+promo.ChannelNamesText)
		}
		req.Channel = c
	}
	for i := range n {
		it, err := item(i)
		if err != nil {
			return req, err
		}
		if err := parseItem(&req, i, it); err != nil {
			return req, err
		}
	}
	return req, nil
}

// parseItem validates item i and appends it to req's items.
func parseItem(req *grab.Request, i int, it wireItem) error {
	field := func(name string) string { return fmt.Sprintf("items[%d].%s", i, name) }
	switch {
	case it.PromoID == nil:
		return httpx.Invalid(field("promoId"), "required")
	case !promo.ValidPromoID(*it.PromoID):
		return httpx.Invalid(field("promoId"), "must match ^[A-Za-z0-9-]{1,64}$")
	case it.Type == nil:
		return httpx.Invalid(field("type"), "required")
	case !promo.ValidType(*it.Type):
		return httpx.Invalid(field("type"), "must be 1..99")
	case it.Num == nil:
		return httpx.Invalid(field("num"), "required")
	case *it.Num < 1 || *it.Num > promo.MaxTotal:
		return httpx.Invalid(field("num"), "must be 1..1000000000")
	}
	for _, prev := range req.Items { // at most 50: a scan beats a map
		if prev.PromoID == *it.PromoID && prev.Type == *it.Type {
			return httpx.Invalid(field("promoId"), "promotion listed twice; put the quantity in num")
		}
	}
	req.Items = append(req.Items, grab.Item{PromoID: *it.PromoID, Type: *it.Type, Num: *it.Num})
	return nil
}

var cancelReasons = map[string]bool{"USER_CANCELLED": true, "PAYMENT_EXPIRED": true, "STOCK_SHORT": true, "OTHER": true}

func decodeCancel(_ context.Context, r *http.Request) (any, error) {
	var w struct {
		Pin    *string `json:"pin"`
		Reason *string `json:"reason"`
	}
	rid, err := grabRef(r, &w, &w.Pin)
	if err != nil {
		return nil, err
	}
	if w.Reason != nil && !cancelReasons[*w.Reason] {
		return nil, httpx.Invalid("reason", "one of USER_CANCELLED, PAYMENT_EXPIRED, STOCK_SHORT, OTHER")
	}
	req := grabendpoint.CancelRequest{RequestID: rid, Pin: *w.Pin, Reason: "USER_CANCELLED"}
	if w.Reason != nil {
		req.Reason = *w.Reason
	}
	return req, nil
}

func decodeConfirm(_ context.Context, r *http.Request) (any, error) {
	var w struct {
		Pin *string `json:"pin"`
	}
	rid, err := grabRef(r, &w, &w.Pin)
	if err != nil {
		return nil, err
	}
	return grabendpoint.ConfirmRequest{RequestID: rid, Pin: *w.Pin}, nil
}

// grabRef reads a route on one grab (cancel, confirm): the {requestId} path value,
// then the body into w, whose pin field (pin points at it) names the buyer who
// made the grab and is required.
func grabRef(r *http.Request, w any, pin **string) (string, error) {
	rid := r.PathValue("requestId")
	if !promo.ValidRequestID(rid) {
		return "", httpx.Invalid("requestId", "must match ^[A-Za-z0-9._:-]{1,128}$")
	}
	if err := httpx.DecodeJSON(nil, r, w, false); err != nil {
		return "", err
	}
	switch {
	case *pin == nil:
		return "", httpx.Invalid("pin", "required")
	case !promo.ValidPin(**pin):
		return "", httpx.Invalid("pin", "1 to 128 printable characters, no whitespace")
	}
	return rid, nil
}

// PromotionPath reads and validates {promoId}/{type} path values.
func PromotionPath(r *http.Request) (string, int, error) {
	id := r.PathValue("promoId")
	if !promo.ValidPromoID(id) {
		return "", 0, httpx.Invalid("promoId", "must match ^[A-Za-z0-9-]{1,64}$")
	}
	typ, err := strconv.Atoi(r.PathValue("type"))
	if err != nil || !promo.ValidType(typ) {
		return "", 0, httpx.Invalid("type", "must be an integer 1..99")
	}
	return id, typ, nil
}

func decodeStatus(_ context.Context, r *http.Request) (any, error) {
	id, typ, err := PromotionPath(r)
	return grabendpoint.StatusRequest{PromoID: id, Type: typ}, err
}
