package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/flashsale/platform/tools/checker"
)

// hostileCases lists the storm. canary is a promotion no load touches; g1 is a
// granted grab on it (pin1, ip1), g2 a granted then returned one (pin2, ip2).
func hostileCases(run, checkout, viewer, admin string, canary sale, g1, g2 *checker.Request) []hostileCase {
	ok := itemJSON(canary.PromoID, canary.Type, 1)
	c := &caseList{run: run, checkout: checkout, viewer: viewer, admin: admin, canary: canary, g1: g1, g2: g2,
		ok: ok, okItems: "[" + ok + "]", pin: q(run + "-hostile"), ip: q("10.99.0.1")}
	c.malformed()
	c.fields()
	c.invalid()
	c.tokens()
	c.replays()
	c.routes()
	c.adminSpecs()
	return c.cs
}

// caseList builds the storm's cases in order: the requestIds it numbers (rid) are
// the ones the drill then looks for in the request index.
type caseList struct {
	cs                           []hostileCase
	n                            int
	run, checkout, viewer, admin string
	canary                       sale
	g1, g2                       *checker.Request
	ok, okItems, pin, ip         string
	valid                        []byte // a valid grab body, for the token and route cases
}

// rid is the next hostile requestId, quoted.
func (c *caseList) rid() string { c.n++; return q(fmt.Sprintf("%s-hx-%d", c.run, c.n)) }

// add adds a grab case.
func (c *caseList) add(name string, body []byte, want int) {
	c.cs = append(c.cs, hostileCase{name: name, service: "grab", method: "POST", path: "/v1/grab", token: c.checkout, body: body, want: want})
}

// itemJSON is one grab item, its values written as they are given.
func itemJSON(id string, typ, num any) string {
	return fmt.Sprintf(`{"promoId":%s,"type":%v,"num":%v}`, q(id), typ, num)
}

// malformed adds malformed and mistyped grab bodies.
func (c *caseList) malformed() {
	// Malformed JSON.
	for i, b := range []string{`{`, `{"requestId":`, `not json`, `[]`, `"a string"`, `123`, `true`,
		`{"requestId":"x"}}`, `{"requestId":"x",}`, "\xef\xbb\xbf{}", `{'requestId':'x'}`, ``, ` `, `{}{}`,
		`{"requestId":"x" "pin":"y"}`, "{\"requestId\":\"\x00\"}", `{"items":[` + strings.Repeat("[", 20000) + `]}`} {
		c.add(fmt.Sprintf("malformed JSON #%d", i), []byte(b), 400)
	}
	// Wrong types.
	for i, b := range [][]byte{
		grabJSON("12345", c.pin, c.ip, c.okItems),
		grabJSON(c.rid(), `{"a":1}`, c.ip, c.okItems),
		grabJSON(c.rid(), c.pin, `["10.0.0.1"]`, c.okItems),
		grabJSON(c.rid(), c.pin, c.ip, `{"promoId":"x"}`),
		grabJSON(c.rid(), c.pin, c.ip, `[1,2]`),
		grabJSON(c.rid(), c.pin, c.ip, `"items"`),
		grabJSON(c.rid(), c.pin, c.ip, "["+itemJSON(c.canary.PromoID, c.canary.Type, `"1"`)+"]"),
		grabJSON(c.rid(), c.pin, c.ip, "["+itemJSON(c.canary.PromoID, c.canary.Type, 1.5)+"]"),
		grabJSON(c.rid(), c.pin, c.ip, "["+itemJSON(c.canary.PromoID, c.canary.Type, "1e0")+"]"),
		grabJSON(c.rid(), c.pin, c.ip, "["+itemJSON(c.canary.PromoID, `"1"`, 1)+"]"),
		grabJSON(c.rid(), c.pin, c.ip, "["+itemJSON(c.canary.PromoID, true, 1)+"]"),
		grabJSON(c.rid(), c.pin, c.ip, "["+itemJSON(c.canary.PromoID, c.canary.Type, "99999999999999999999")+"]"),
		grabJSON(c.rid(), c.pin, c.ip, "["+itemJSON(c.canary.PromoID, c.canary.Type, "null")+"]"),
		grabJSON("null", c.pin, c.ip, c.okItems),
		grabJSON(c.rid(), "null", c.ip, c.okItems),
		grabJSON(c.rid(), c.pin, "null", c.okItems),
		grabJSON(c.rid(), c.pin, c.ip, "null"),
		grabJSON(c.rid(), c.pin, c.ip, "[null]"),
		grabJSON(c.rid(), c.pin, c.ip, `[{"promoId":null,"type":1,"num":1}]`),
	} {
		c.add(fmt.Sprintf("wrong type #%d", i), b, 400)
	}
}

// fields adds unknown, case-folded and duplicate keys, oversized bodies and item lists.
func (c *caseList) fields() {
	// Unknown fields, and keys that match a field only case-insensitively.
	c.add("unknown field", []byte(fmt.Sprintf(`{"requestId":%s,"pin":%s,"ip":%s,"items":%s,"coupon":"FREE"}`, c.rid(), c.pin, c.ip, c.okItems)), 400)
	c.add("unknown item field", grabJSON(c.rid(), c.pin, c.ip, fmt.Sprintf(`[{"promoId":%s,"type":%d,"num":1,"price":0}]`, q(c.canary.PromoID), c.canary.Type)), 400)
	c.add("case-folded key", []byte(fmt.Sprintf(`{"RequestId":%s,"pin":%s,"ip":%s,"items":%s}`, c.rid(), c.pin, c.ip, c.okItems)), 400)
	c.add("case-folded item key", grabJSON(c.rid(), c.pin, c.ip, fmt.Sprintf(`[{"PROMOID":%s,"type":%d,"num":1}]`, q(c.canary.PromoID), c.canary.Type)), 400)
	// A key given twice: a decoder that keeps the last value lets a filter in front of
	// the service see one requestId and the service another.
	c.add("duplicate key", []byte(fmt.Sprintf(`{"requestId":%s,"requestId":%s,"pin":%s,"ip":%s,"items":%s}`, c.rid(), c.rid(), c.pin, c.ip, c.okItems)), 400)
	c.add("duplicate item key", grabJSON(c.rid(), c.pin, c.ip, fmt.Sprintf(`[{"promoId":%s,"type":%d,"num":1,"num":2}]`, q(c.canary.PromoID), c.canary.Type)), 400)
	// Oversized bodies and huge item lists.
	c.add("oversized body", grabJSON(c.rid(), q(strings.Repeat("p", 70<<10)), c.ip, c.okItems), 413)
	c.add("oversized body, 1 MiB of items", grabJSON(c.rid(), c.pin, c.ip, "["+strings.Repeat(c.ok+",", 1<<20/len(c.ok))+c.ok+"]"), 413)
	many := func(k int) string {
		var its []string
		for i := 0; i < k; i++ {
			its = append(its, itemJSON(fmt.Sprintf("hx%d", i), 1, 1))
		}
		return "[" + strings.Join(its, ",") + "]"
	}
	c.add("51 items", grabJSON(c.rid(), c.pin, c.ip, many(51)), 400)
	c.add("1200 items", grabJSON(c.rid(), c.pin, c.ip, many(1200)), 400)
	c.add("no items", grabJSON(c.rid(), c.pin, c.ip, "[]"), 400)
	c.add("one promotion twice", grabJSON(c.rid(), c.pin, c.ip, "["+c.ok+","+c.ok+"]"), 400)
}

// invalid adds invalid values and missing fields.
func (c *caseList) invalid() {
	// Invalid ids, which must never reach a Redis key.
	for i, id := range []string{"", "a b", "a_b", "{C_x}", "C_x_1}:pins", strings.Repeat("a", 65), "促销", "x\r\ny", "../x", "*", "a\x00b"} {
		c.add(fmt.Sprintf("invalid promoId #%d", i), grabJSON(c.rid(), c.pin, c.ip, "["+itemJSON(id, 1, 1)+"]"), 400)
	}
	for i, typ := range []any{0, 100, -1, 1 << 40} {
		c.add(fmt.Sprintf("invalid type #%d", i), grabJSON(c.rid(), c.pin, c.ip, "["+itemJSON(c.canary.PromoID, typ, 1)+"]"), 400)
	}
	for i, num := range []any{0, -1, 1000000001} {
		c.add(fmt.Sprintf("invalid num #%d", i), grabJSON(c.rid(), c.pin, c.ip, "["+itemJSON(c.canary.PromoID, c.canary.Type, num)+"]"), 400)
	}
	c.add("num above maxPerGrab", grabJSON(c.rid(), c.pin, c.ip, "["+itemJSON(c.canary.PromoID, c.canary.Type, 50)+"]"), 400)
	for i, r := range []string{"", strings.Repeat("r", 129), "a/b", "a b", "../../x", "{x}", "r\u00e9"} {
		c.add(fmt.Sprintf("invalid requestId #%d", i), grabJSON(q(r), c.pin, c.ip, c.okItems), 400)
	}
	for i, p := range []string{"", "a b", strings.Repeat("p", 129), "a\x00b", "tab\there", "\x7f"} {
		c.add(fmt.Sprintf("invalid pin #%d", i), grabJSON(c.rid(), q(p), c.ip, c.okItems), 400)
	}
	for i, a := range []string{"", "999.1.1.1", "1.2.3", "::1%eth0", "abc", "1.2.3.4:80", " 1.2.3.4", "01.2.3.4", "1.2.3.4/24"} {
		c.add(fmt.Sprintf("invalid ip #%d", i), grabJSON(c.rid(), c.pin, q(a), c.okItems), 400)
	}
	for i, f := range []string{"requestId", "pin", "ip", "items"} {
		m := map[string]json.RawMessage{"requestId": json.RawMessage(c.rid()), "pin": json.RawMessage(c.pin), "ip": json.RawMessage(c.ip), "items": json.RawMessage(c.okItems)}
		delete(m, f)
		b, _ := json.Marshal(m)
		c.add(fmt.Sprintf("missing field #%d %s", i, f), b, 400)
	}
}

// tokens adds wrong and missing tokens.
func (c *caseList) tokens() {
	c.valid = grabJSON(c.rid(), c.pin, c.ip, c.okItems)
	for i, a := range []struct {
		token, auth string
	}{{"", ""}, {"wrong-token", ""}, {c.checkout[:len(c.checkout)-1], ""}, {c.checkout + "x", ""}, {c.viewer, ""}, {c.admin, ""},
		{"", "Basic " + c.checkout}, {"", "Bearer"}, {"", "Bearer "}, {"", "bearer " + c.checkout}, {"", c.checkout}} {
		c.cs = append(c.cs, hostileCase{name: fmt.Sprintf("token #%d", i), service: "grab", method: "POST", path: "/v1/grab",
			token: a.token, auth: a.auth, body: c.valid, want: 401})
	}
	c.cs = append(c.cs, hostileCase{name: "cancel without token", service: "grab", method: "POST", path: "/v1/grab/" + c.g1.RequestID + "/cancel",
		body: []byte(`{"pin":` + q(c.g1.Pin) + `}`), want: 401})
}

// replays adds replayed and conflicting requestIds, cancels and confirms of the canary's grabs.
func (c *caseList) replays() {
	body1 := grabBody(c.g1)
	body2 := grabBody(c.g2)
	c.cs = append(c.cs,
		hostileCase{name: "replay of a granted grab", service: "grab", method: "POST", path: "/v1/grab", token: c.checkout, body: body1, want: 200},
		hostileCase{name: "replay of a returned grab", service: "grab", method: "POST", path: "/v1/grab", token: c.checkout, body: body2, want: 409},
		hostileCase{name: "requestId reused, other num", service: "grab", method: "POST", path: "/v1/grab", token: c.checkout, want: 409,
			body: grabJSON(q(c.g1.RequestID), q(c.g1.Pin), q(c.g1.IP), "["+itemJSON(c.canary.PromoID, c.canary.Type, 2)+"]")},
		hostileCase{name: "requestId reused, other pin", service: "grab", method: "POST", path: "/v1/grab", token: c.checkout, want: 409,
			body: grabJSON(q(c.g1.RequestID), q(c.g1.Pin+"x"), q(c.g1.IP), c.okItems)},
		hostileCase{name: "requestId reused, other promotion", service: "grab", method: "POST", path: "/v1/grab", token: c.checkout, want: 409,
			body: grabJSON(q(c.g1.RequestID), q(c.g1.Pin), q(c.g1.IP), "["+itemJSON(c.canary.PromoID+"-other", c.canary.Type, 1)+"]")},
		hostileCase{name: "cancel with another pin", service: "grab", method: "POST", path: "/v1/grab/" + c.g1.RequestID + "/cancel", token: c.checkout,
			body: []byte(`{"pin":` + q(c.g1.Pin+"x") + `}`), want: 404},
		hostileCase{name: "cancel of an unknown grab", service: "grab", method: "POST", path: "/v1/grab/" + c.run + "-hx-none/cancel", token: c.checkout,
			body: []byte(`{"pin":` + q(c.g1.Pin) + `}`), want: 404},
		hostileCase{name: "cancel replay", service: "grab", method: "POST", path: "/v1/grab/" + c.g2.RequestID + "/cancel", token: c.checkout,
			body: []byte(`{"pin":` + q(c.g2.Pin) + `}`), want: 200},
		hostileCase{name: "cancel with a bad reason", service: "grab", method: "POST", path: "/v1/grab/" + c.g1.RequestID + "/cancel", token: c.checkout,
			body: []byte(`{"pin":` + q(c.g1.Pin) + `,"reason":"FREE_MONEY"}`), want: 400},
		hostileCase{name: "cancel with unknown field", service: "grab", method: "POST", path: "/v1/grab/" + c.g1.RequestID + "/cancel", token: c.checkout,
			body: []byte(`{"pin":` + q(c.g1.Pin) + `,"refund":100}`), want: 400},
		hostileCase{name: "cancel without body", service: "grab", method: "POST", path: "/v1/grab/" + c.g1.RequestID + "/cancel", token: c.checkout, want: 400},
		// Confirms of held grants: g1 has no hold (it confirms, changing nothing), g2 was returned.
		hostileCase{name: "confirm without token", service: "grab", method: "POST", path: "/v1/grab/" + c.g1.RequestID + "/confirm",
			body: []byte(`{"pin":` + q(c.g1.Pin) + `}`), want: 401},
		hostileCase{name: "confirm with another pin", service: "grab", method: "POST", path: "/v1/grab/" + c.g1.RequestID + "/confirm", token: c.checkout,
			body: []byte(`{"pin":` + q(c.g1.Pin+"x") + `}`), want: 404},
		hostileCase{name: "confirm of an unknown grab", service: "grab", method: "POST", path: "/v1/grab/" + c.run + "-hx-none/confirm", token: c.checkout,
			body: []byte(`{"pin":` + q(c.g1.Pin) + `}`), want: 404},
		hostileCase{name: "confirm of a returned grab", service: "grab", method: "POST", path: "/v1/grab/" + c.g2.RequestID + "/confirm", token: c.checkout,
			body: []byte(`{"pin":` + q(c.g2.Pin) + `}`), want: 409},
		hostileCase{name: "confirm with unknown field", service: "grab", method: "POST", path: "/v1/grab/" + c.g1.RequestID + "/confirm", token: c.checkout,
			body: []byte(`{"pin":` + q(c.g1.Pin) + `,"paid":true}`), want: 400},
		hostileCase{name: "confirm without body", service: "grab", method: "POST", path: "/v1/grab/" + c.g1.RequestID + "/confirm", token: c.checkout, want: 400},
	)
}

// routes adds hold times, cancel paths, methods, routes and headers.
func (c *caseList) routes() {
	for i, hold := range []string{"0", "-5", "86401", "1.5", `"60"`, "1e3"} {
		body := `{"requestId":` + q(fmt.Sprintf("%s-hx-hold-%d", c.run, i)) + `,"pin":"p","ip":"10.98.0.9","holdSeconds":` + hold + `,"items":` + c.okItems + `}`
		c.cs = append(c.cs, hostileCase{name: "holdSeconds " + hold, service: "grab", method: "POST", path: "/v1/grab", token: c.checkout, body: []byte(body), want: 400})
	}
	for i, p := range []string{"/v1/grab/a%20b/cancel", "/v1/grab/" + strings.Repeat("r", 129) + "/cancel", "/v1/grab/..%2F..%2Fx/cancel", "/v1/grab/%7Bx%7D/cancel"} {
		c.cs = append(c.cs, hostileCase{name: fmt.Sprintf("cancel path #%d", i), service: "grab", method: "POST", path: p, token: c.checkout,
			body: []byte(`{"pin":"a"}`)})
	}
	// Methods, routes and the public status route.
	for i, r := range []struct{ method, path string }{
		{"GET", "/v1/grab"}, {"PUT", "/v1/grab"}, {"DELETE", "/v1/grab"}, {"POST", "/v1/grab/"}, {"GET", "/v1/grab/" + c.g1.RequestID + "/cancel"},
		{"POST", "/v1/nothing"}, {"GET", "/v1/promotions/a%20b/1/status"}, {"GET", "/v1/promotions/x/abc/status"},
		{"GET", "/v1/promotions/x/99999999999999999999/status"}, {"GET", "/v1/promotions/x/0/status"},
		{"GET", "/v1/promotions/" + strings.Repeat("a", 65) + "/1/status"}, {"POST", "/v1/promotions/x/1/status"},
	} {
		c.cs = append(c.cs, hostileCase{name: fmt.Sprintf("route #%d %s %s", i, r.method, r.path), service: "grab", method: r.method, path: r.path, token: c.checkout, body: c.valid})
	}
	c.cs = append(c.cs, hostileCase{name: "header block too large", service: "grab", method: "POST", path: "/v1/grab", token: c.checkout, body: c.valid,
		header: map[string]string{"X-Padding": strings.Repeat("h", 40<<10)}, want: 431, plain: true})
	for _, v := range []string{"0", "-1", "first", "1e3", "99999999999999999999"} {
		c.cs = append(c.cs, hostileCase{name: "attempt header " + q(v), service: "grab", method: "POST", path: "/v1/grab", token: c.checkout, body: c.valid,
			header: map[string]string{"X-Grab-Attempt": v}, want: 400})
	}
}

// adminSpecs adds bad promotion specs: promo-admin refuses them before any write.
func (c *caseList) adminSpecs() {
	adminCase := func(name, method, path, token string, body string, want int) {
		c.cs = append(c.cs, hostileCase{name: "admin " + name, service: "admin", method: method, path: path, token: token, body: []byte(body), want: want})
	}
	hid := func(i int) string { return fmt.Sprintf("%s-hxp%d", c.run, i) }
	spec := func(i int, extra string) string {
		s := fmt.Sprintf(`{"promoId":%s,"type":1,"total":10,"startAt":"2026-01-01T00:00:00Z","endAt":"2099-01-01T00:00:00Z"`, q(hid(i)))
		return s + extra + "}"
	}
	adminCase("malformed", "POST", "/v1/promotions", c.admin, `{"promoId":`, 400)
	adminCase("unknown field", "POST", "/v1/promotions", c.admin, spec(1, `,"discount":99`), 400)
	adminCase("case-folded key", "POST", "/v1/promotions", c.admin, strings.Replace(spec(2, ""), `"total"`, `"TOTAL"`, 1), 400)
	adminCase("duplicate key", "POST", "/v1/promotions", c.admin, spec(3, `,"total":1000000`), 400)
	adminCase("total as string", "POST", "/v1/promotions", c.admin, strings.Replace(spec(4, ""), `"total":10`, `"total":"10"`, 1), 400)
	adminCase("total 0", "POST", "/v1/promotions", c.admin, strings.Replace(spec(5, ""), `"total":10`, `"total":0`, 1), 400)
	adminCase("total negative", "POST", "/v1/promotions", c.admin, strings.Replace(spec(6, ""), `"total":10`, `"total":-5`, 1), 400)
	adminCase("total too large", "POST", "/v1/promotions", c.admin, strings.Replace(spec(7, ""), `"total":10`, `"total":1000000000000`, 1), 400)
	adminCase("bad startAt", "POST", "/v1/promotions", c.admin, strings.Replace(spec(8, ""), `2026-01-01T00:00:00Z`, `yesterday`, 1), 400)
	adminCase("end before start", "POST", "/v1/promotions", c.admin, strings.Replace(spec(9, ""), `2099-01-01T00:00:00Z`, `2025-01-01T00:00:00Z`, 1), 400)
	adminCase("invalid promoId", "POST", "/v1/promotions", c.admin, strings.Replace(spec(10, ""), q(hid(10)), `"{C_x}"`, 1), 400)
	adminCase("type 0", "POST", "/v1/promotions", c.admin, strings.Replace(spec(11, ""), `"type":1`, `"type":0`, 1), 400)
	adminCase("negative limit", "POST", "/v1/promotions", c.admin, spec(12, `,"perPinLimit":-1`), 400)
	adminCase("negative rate limit", "POST", "/v1/promotions", c.admin, spec(13, `,"rateLimit":{"limit":-1}`), 400)
	adminCase("rate limit without limit", "POST", "/v1/promotions", c.admin, spec(14, `,"rateLimit":{}`), 400)
	adminCase("title too long", "POST", "/v1/promotions", c.admin, spec(15, `,"title":`+q(strings.Repeat("t", 1000))), 400)
	adminCase("maxPerGrab 0", "POST", "/v1/promotions", c.admin, spec(16, `,"maxPerGrab":0`), 400)
	adminCase("oversized", "POST", "/v1/promotions", c.admin, spec(17, `,"title":`+q(strings.Repeat("t", 70<<10))), 413)
	adminCase("viewer writes", "POST", "/v1/promotions", c.viewer, spec(18, ""), 403)
	adminCase("checkout token", "POST", "/v1/promotions", c.checkout, spec(19, ""), 401)
	adminCase("no token", "POST", "/v1/promotions", "", spec(20, ""), 401)
	adminCase("patch unknown", "PATCH", "/v1/promotions/"+hid(21)+"/1", c.admin, `{"total":5}`, 404)
	adminCase("patch wrong type", "PATCH", "/v1/promotions/"+url.PathEscape(c.canary.PromoID)+fmt.Sprintf("/%d", c.canary.Type), c.admin, `{"total":"many"}`, 400)
	adminCase("patch unknown field", "PATCH", "/v1/promotions/"+url.PathEscape(c.canary.PromoID)+fmt.Sprintf("/%d", c.canary.Type), c.admin, `{"remaining":1000000}`, 400)
	adminCase("patch below granted", "PATCH", "/v1/promotions/"+url.PathEscape(c.canary.PromoID)+fmt.Sprintf("/%d", c.canary.Type), c.admin, `{"total":0}`, 400)
	adminCase("stop with viewer", "POST", "/v1/promotions/"+url.PathEscape(c.canary.PromoID)+fmt.Sprintf("/%d/stop", c.canary.Type), c.viewer, `{}`, 403)
	adminCase("delete with bad type", "DELETE", "/v1/promotions/x/abc", c.admin, ``, 400)
	adminCase("get invalid id", "GET", "/v1/promotions/a%20b/1", c.admin, ``, 400)
	adminCase("list bad limit", "GET", "/v1/promotions?limit=-5", c.admin, ``, 400)
	adminCase("list bad cursor", "GET", "/v1/promotions?cursor=%00%00", c.admin, ``, 400)
}
