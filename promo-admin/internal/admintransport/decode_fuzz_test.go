package admintransport

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"testing"

	"github.com/flashsale/platform/internal/httpx"
	"github.com/flashsale/platform/promo-admin/internal/adminendpoint"
)

// The promo-admin body decoders under fuzzing: whatever the body, they return a
// request or a 4xx contract Error with a message, and never panic.

func checkRefusal(t *testing.T, body []byte, err error) {
	var e *httpx.Error
	if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 || e.Code == "" || e.Message == "" {
		t.Fatalf("body %q: refusal %#v is not a 4xx contract Error with a message", body, err)
	}
}

func FuzzDecodeCreate(f *testing.F) {
	f.Add([]byte(`{"promoId":"A","type":1,"title":"t","total":10,"perPinLimit":1,"perIpLimit":2,"maxPerGrab":1,` +
		`"rateLimit":{"limit":5,"windowSeconds":1},"startAt":"2026-01-01T00:00:00Z","endAt":"2026-01-02T00:00:00+08:00"}`))
	f.Add([]byte(`{"promoId":"A","type":1,"total":10,"startAt":"2026-01-01T00:00:00Z","endAt":"2026-01-02T00:00:00Z","total":11}`))
	f.Add([]byte(`{"promoId":"A","type":1,"total":10,"startAt":"2026-01-01T00:00:00Z","endAt":"2026-01-02T00:00:00Z","buckets":4}`))
	f.Add([]byte(`{"promoId":"A","type":1,"total":10,"startAt":"2026-01-01T00:00:00Z","endAt":"2026-01-02T00:00:00Z","envelope":{"amount":100,"minAmount":1}}`))
	f.Add([]byte(`{"promoId":"A","type":1,"total":10,"startAt":"2026-01-01T00:00:00Z","endAt":"2026-01-02T00:00:00Z","envelope":{"amount":100,"minAmount":1,"remainingAmount":5}}`))
	f.Add([]byte(`{"envelope":null}`))
	f.Add([]byte(`{"envelope":[1]}`))
	f.Add([]byte(`{"rateLimit":{}}`))
	f.Add([]byte(`{"startAt":"2026-13-01T00:00:00Z"}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/v1/promotions", bytes.NewReader(body))
		v, err := decodeCreate(context.Background(), r)
		if err != nil {
			checkRefusal(t, body, err)
			return
		}
		s := v.(adminendpoint.CreateRequest).Spec
		if s.StartAt.IsZero() || s.EndAt.IsZero() {
			t.Fatalf("body %q: accepted without its required times: %+v", body, s)
		}
	})
}

func FuzzDecodePatch(f *testing.F) {
	f.Add("1", []byte(`{"total":5,"perPinLimit":1,"perIpLimit":0,"rateLimit":{"limit":1},"endAt":"2030-01-01T00:00:00Z"}`))
	f.Add("x", []byte(`{}`))
	f.Add("1", []byte(`{"buckets":4,"total":8}`))
	f.Add("99999999999999999999", []byte(`{"total":"5"}`))
	f.Add("1", []byte(`{"endAt":null,"endAt":"2030-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, typ string, body []byte) {
		r := httptest.NewRequest("PATCH", "/v1/promotions/A/1", bytes.NewReader(body))
		r.SetPathValue("promoId", "A")
		r.SetPathValue("type", typ)
		v, err := decodePatch(context.Background(), r)
		if err != nil {
			checkRefusal(t, body, err)
			return
		}
		if req := v.(adminendpoint.PatchRequest); req.ID.PromoID != "A" {
			t.Fatalf("path promoId lost: %+v", req)
		}
	})
}
