package grabtransport_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Every bad input gets a 4xx naming what is wrong, and changes nothing.
func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.promotion("input", spec{total: 10})
	good := func(mod func(m map[string]any)) map[string]any {
		b := grabBody("in-1", "pin", "10.9.0.1", id, 1)
		mod(b)
		return b
	}
	item := func(mod func(m map[string]any)) map[string]any {
		return good(func(b map[string]any) { mod(b["items"].([]map[string]any)[0]) })
	}
	many := make([]map[string]any, 51)
	for i := range many {
		many[i] = map[string]any{"promoId": fmt.Sprintf("p%d", i), "type": 1, "num": 1}
	}
	cases := []struct {
		name        string
		token       string
		body        any
		status      int
		code, field string
	}{
		{"missing token", "", good(func(map[string]any) {}), 401, "UNAUTHORIZED", ""},
		{"unknown token", "nope", good(func(map[string]any) {}), 401, "UNAUTHORIZED", ""},
		{"token without the role", "viewer", good(func(map[string]any) {}), 403, "FORBIDDEN", ""},
		{"malformed JSON", checkoutToken, `{"requestId": `, 400, "INVALID_REQUEST", ""},
		{"not an object", checkoutToken, `[1,2]`, 400, "INVALID_REQUEST", ""},
		{"empty body", checkoutToken, ``, 400, "INVALID_REQUEST", ""},
		{"trailing data", checkoutToken, `{"requestId":"a","pin":"p","ip":"10.0.0.1","items":[{"promoId":"` + id + `","type":1,"num":1}]} {}`, 400, "INVALID_REQUEST", ""},
		{"unknown field", checkoutToken, good(func(b map[string]any) { b["coupon"] = "x" }), 400, "INVALID_REQUEST", "coupon"},
		{"wrong type", checkoutToken, good(func(b map[string]any) { b["pin"] = 42 }), 400, "INVALID_REQUEST", "pin"},
		{"missing requestId", checkoutToken, good(func(b map[string]any) { delete(b, "requestId") }), 400, "INVALID_REQUEST", "requestId"},
		{"bad requestId", checkoutToken, good(func(b map[string]any) { b["requestId"] = "a b" }), 400, "INVALID_REQUEST", "requestId"},
		{"long requestId", checkoutToken, good(func(b map[string]any) { b["requestId"] = strings.Repeat("a", 129) }), 400, "INVALID_REQUEST", "requestId"},
		{"missing pin", checkoutToken, good(func(b map[string]any) { delete(b, "pin") }), 400, "INVALID_REQUEST", "pin"},
		{"pin with space", checkoutToken, good(func(b map[string]any) { b["pin"] = "a b" }), 400, "INVALID_REQUEST", "pin"},
		{"bad ip", checkoutToken, good(func(b map[string]any) { b["ip"] = "10.0.0.300" }), 400, "INVALID_REQUEST", "ip"},
		{"missing ip", checkoutToken, good(func(b map[string]any) { delete(b, "ip") }), 400, "INVALID_REQUEST", "ip"},
		{"no items", checkoutToken, good(func(b map[string]any) { b["items"] = []any{} }), 400, "INVALID_REQUEST", "items"},
		{"51 items", checkoutToken, good(func(b map[string]any) { b["items"] = many }), 400, "INVALID_REQUEST", "items"},
		{"bad promoId", checkoutToken, item(func(i map[string]any) { i["promoId"] = "C_1}x" }), 400, "INVALID_REQUEST", "items[0].promoId"},
		{"type 0", checkoutToken, item(func(i map[string]any) { i["type"] = 0 }), 400, "INVALID_REQUEST", "items[0].type"},
		{"type 100", checkoutToken, item(func(i map[string]any) { i["type"] = 100 }), 400, "INVALID_REQUEST", "items[0].type"},
		{"num 0", checkoutToken, item(func(i map[string]any) { i["num"] = 0 }), 400, "INVALID_REQUEST", "items[0].num"},
		{"num fraction", checkoutToken, item(func(i map[string]any) { i["num"] = 1.5 }), 400, "INVALID_REQUEST", "items[0].num"},
		{"item unknown field", checkoutToken, item(func(i map[string]any) { i["price"] = 1 }), 400, "INVALID_REQUEST", "items[0].price"},
		{"duplicate item", checkoutToken, good(func(b map[string]any) {
			b["items"] = append(b["items"].([]map[string]any), map[string]any{"promoId": id, "type": 1, "num": 1})
		}), 400, "INVALID_REQUEST", "items[1].promoId"},
		{"oversized body", checkoutToken, good(func(b map[string]any) { b["pad"] = strings.Repeat("x", 70<<10) }), 413, "PAYLOAD_TOO_LARGE", ""},
	}
	for _, c := range cases {
		r := e.do("POST", "/v1/grab", c.token, c.body)
		if r.status != c.status || r.err.Code != c.code || r.err.Field != c.field || r.err.Message == "" {
			t.Errorf("%s: want %d %s field %q, have %d %s", c.name, c.status, c.code, c.field, r.status, r.raw)
		}
		if r.header.Get("X-Request-Id") == "" {
			t.Errorf("%s: no X-Request-Id", c.name)
		}
	}
	cancels := []struct {
		name, path string
		token      string
		body       any
		status     int
		field      string
	}{
		{"cancel without token", "/v1/grab/r1/cancel", "", map[string]any{"pin": "p"}, 401, ""},
		{"cancel bad requestId", "/v1/grab/a%20b/cancel", checkoutToken, map[string]any{"pin": "p"}, 400, "requestId"},
		{"cancel missing pin", "/v1/grab/r1/cancel", checkoutToken, map[string]any{}, 400, "pin"},
		{"cancel bad reason", "/v1/grab/r1/cancel", checkoutToken, map[string]any{"pin": "p", "reason": "BORED"}, 400, "reason"},
		{"cancel unknown field", "/v1/grab/r1/cancel", checkoutToken, map[string]any{"pin": "p", "x": 1}, 400, "x"},
	}
	for _, c := range cancels {
		r := e.do("POST", c.path, c.token, c.body)
		if r.status != c.status || r.err.Field != c.field {
			t.Errorf("%s: want %d field %q, have %d %s", c.name, c.status, c.field, r.status, r.raw)
		}
	}
	if h := e.hash(id); h.Remaining != 10 || h.WinCount != 0 {
		t.Fatalf("bad input changed the promotion: %+v", h)
	}
	if n := len(e.pub.Events()); n != 0 {
		t.Fatalf("bad input published %d events", n)
	}
	if r := e.grab(good(func(map[string]any) {})); r.status != http.StatusOK {
		t.Fatalf("the good body after all that: %d %s", r.status, r.raw)
	}
}
