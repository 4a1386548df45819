package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/tools/checker"
)

// A hostile case is one request a careless or malicious client might send. Every
// one must be answered 4xx with a clear message (the contract's Error body, or a
// GrabResult naming the refusal), never 5xx, and must change nothing.
type hostileCase struct {
	name    string
	service string // "grab" or "admin"
	method  string
	path    string
	token   string // "" sends no Authorization header
	auth    string // raw Authorization header, overrides token
	body    []byte
	header  map[string]string
	// want is the exact status expected (0: any 4xx).
	want int
	// plain: the answer comes from net/http itself before any handler (431), so
	// a plain-text body is all it can be.
	plain bool
}

// hostileResult is what the storm found.
type hostileResult struct {
	tried    int
	findings []string
}

func (h *hostileResult) find(format string, args ...any) {
	f := fmt.Sprintf(format, args...)
	for _, seen := range h.findings { // the storm sends every case several times
		if seen == f {
			return
		}
	}
	h.findings = append(h.findings, f)
}

// grabJSON builds a grab body by hand (so wrong types can be written).
func grabJSON(rid, pin, ip, items string) []byte {
	return []byte(fmt.Sprintf(`{"requestId":%s,"pin":%s,"ip":%s,"items":%s}`, rid, pin, ip, items))
}

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

// hostileCases lists the storm. canary is a promotion no load touches; g1 is a
// granted grab on it (pin1, ip1), g2 a granted then returned one (pin2, ip2).
func hostileCases(run, checkout, viewer, admin string, canary sale, g1, g2 *checker.Request) []hostileCase {
	n := 0
	rid := func() string { n++; return q(fmt.Sprintf("%s-hx-%d", run, n)) }
	item := func(id string, typ, num any) string {
		return fmt.Sprintf(`{"promoId":%s,"type":%v,"num":%v}`, q(id), typ, num)
	}
	ok := item(canary.PromoID, canary.Type, 1)
	okItems := "[" + ok + "]"
	pin, ip := q(run+"-hostile"), q("10.99.0.1")
	var cs []hostileCase
	add := func(name string, body []byte, want int) {
		cs = append(cs, hostileCase{name: name, service: "grab", method: "POST", path: "/v1/grab", token: checkout, body: body, want: want})
	}

	// Malformed JSON.
	for i, b := range []string{`{`, `{"requestId":`, `not json`, `[]`, `"a string"`, `123`, `true`,
		`{"requestId":"x"}}`, `{"requestId":"x",}`, "\xef\xbb\xbf{}", `{'requestId':'x'}`, ``, ` `, `{}{}`,
		`{"requestId":"x" "pin":"y"}`, "{\"requestId\":\"\x00\"}", `{"items":[` + strings.Repeat("[", 20000) + `]}`} {
		add(fmt.Sprintf("malformed JSON #%d", i), []byte(b), 400)
	}
	// Wrong types.
	for i, b := range [][]byte{
		grabJSON("12345", pin, ip, okItems),
		grabJSON(rid(), `{"a":1}`, ip, okItems),
		grabJSON(rid(), pin, `["10.0.0.1"]`, okItems),
		grabJSON(rid(), pin, ip, `{"promoId":"x"}`),
		grabJSON(rid(), pin, ip, `[1,2]`),
		grabJSON(rid(), pin, ip, `"items"`),
		grabJSON(rid(), pin, ip, "["+item(canary.PromoID, canary.Type, `"1"`)+"]"),
		grabJSON(rid(), pin, ip, "["+item(canary.PromoID, canary.Type, 1.5)+"]"),
		grabJSON(rid(), pin, ip, "["+item(canary.PromoID, canary.Type, "1e0")+"]"),
		grabJSON(rid(), pin, ip, "["+item(canary.PromoID, `"1"`, 1)+"]"),
		grabJSON(rid(), pin, ip, "["+item(canary.PromoID, true, 1)+"]"),
		grabJSON(rid(), pin, ip, "["+item(canary.PromoID, canary.Type, "99999999999999999999")+"]"),
		grabJSON(rid(), pin, ip, "["+item(canary.PromoID, canary.Type, "null")+"]"),
		grabJSON("null", pin, ip, okItems),
		grabJSON(rid(), "null", ip, okItems),
		grabJSON(rid(), pin, "null", okItems),
		grabJSON(rid(), pin, ip, "null"),
		grabJSON(rid(), pin, ip, "[null]"),
		grabJSON(rid(), pin, ip, `[{"promoId":null,"type":1,"num":1}]`),
	} {
		add(fmt.Sprintf("wrong type #%d", i), b, 400)
	}
	// Unknown fields, and keys that match a field only case-insensitively.
	add("unknown field", []byte(fmt.Sprintf(`{"requestId":%s,"pin":%s,"ip":%s,"items":%s,"coupon":"FREE"}`, rid(), pin, ip, okItems)), 400)
	add("unknown item field", grabJSON(rid(), pin, ip, fmt.Sprintf(`[{"promoId":%s,"type":%d,"num":1,"price":0}]`, q(canary.PromoID), canary.Type)), 400)
	add("case-folded key", []byte(fmt.Sprintf(`{"RequestId":%s,"pin":%s,"ip":%s,"items":%s}`, rid(), pin, ip, okItems)), 400)
	add("case-folded item key", grabJSON(rid(), pin, ip, fmt.Sprintf(`[{"PROMOID":%s,"type":%d,"num":1}]`, q(canary.PromoID), canary.Type)), 400)
	// A key given twice: a decoder that keeps the last value lets a filter in front of
	// the service see one requestId and the service another.
	add("duplicate key", []byte(fmt.Sprintf(`{"requestId":%s,"requestId":%s,"pin":%s,"ip":%s,"items":%s}`, rid(), rid(), pin, ip, okItems)), 400)
	add("duplicate item key", grabJSON(rid(), pin, ip, fmt.Sprintf(`[{"promoId":%s,"type":%d,"num":1,"num":2}]`, q(canary.PromoID), canary.Type)), 400)
	// Oversized bodies and huge item lists.
	add("oversized body", grabJSON(rid(), q(strings.Repeat("p", 70<<10)), ip, okItems), 413)
	add("oversized body, 1 MiB of items", grabJSON(rid(), pin, ip, "["+strings.Repeat(ok+",", 1<<20/len(ok))+ok+"]"), 413)
	many := func(k int) string {
		var its []string
		for i := 0; i < k; i++ {
			its = append(its, item(fmt.Sprintf("hx%d", i), 1, 1))
		}
		return "[" + strings.Join(its, ",") + "]"
	}
	add("51 items", grabJSON(rid(), pin, ip, many(51)), 400)
	add("1200 items", grabJSON(rid(), pin, ip, many(1200)), 400)
	add("no items", grabJSON(rid(), pin, ip, "[]"), 400)
	add("one promotion twice", grabJSON(rid(), pin, ip, "["+ok+","+ok+"]"), 400)
	// Invalid ids, which must never reach a Redis key.
	for i, id := range []string{"", "a b", "a_b", "{C_x}", "C_x_1}:pins", strings.Repeat("a", 65), "促销", "x\r\ny", "../x", "*", "a\x00b"} {
		add(fmt.Sprintf("invalid promoId #%d", i), grabJSON(rid(), pin, ip, "["+item(id, 1, 1)+"]"), 400)
	}
	for i, typ := range []any{0, 100, -1, 1 << 40} {
		add(fmt.Sprintf("invalid type #%d", i), grabJSON(rid(), pin, ip, "["+item(canary.PromoID, typ, 1)+"]"), 400)
	}
	for i, num := range []any{0, -1, 1000000001} {
		add(fmt.Sprintf("invalid num #%d", i), grabJSON(rid(), pin, ip, "["+item(canary.PromoID, canary.Type, num)+"]"), 400)
	}
	add("num above maxPerGrab", grabJSON(rid(), pin, ip, "["+item(canary.PromoID, canary.Type, 50)+"]"), 400)
	for i, r := range []string{"", strings.Repeat("r", 129), "a/b", "a b", "../../x", "{x}", "r\u00e9"} {
		add(fmt.Sprintf("invalid requestId #%d", i), grabJSON(q(r), pin, ip, okItems), 400)
	}
	for i, p := range []string{"", "a b", strings.Repeat("p", 129), "a\x00b", "tab\there", "\x7f"} {
		add(fmt.Sprintf("invalid pin #%d", i), grabJSON(rid(), q(p), ip, okItems), 400)
	}
	for i, a := range []string{"", "999.1.1.1", "1.2.3", "::1%eth0", "abc", "1.2.3.4:80", " 1.2.3.4", "01.2.3.4", "1.2.3.4/24"} {
		add(fmt.Sprintf("invalid ip #%d", i), grabJSON(rid(), pin, q(a), okItems), 400)
	}
	for i, f := range []string{"requestId", "pin", "ip", "items"} {
		m := map[string]json.RawMessage{"requestId": json.RawMessage(rid()), "pin": json.RawMessage(pin), "ip": json.RawMessage(ip), "items": json.RawMessage(okItems)}
		delete(m, f)
		b, _ := json.Marshal(m)
		add(fmt.Sprintf("missing field #%d %s", i, f), b, 400)
	}

	// Wrong and missing tokens.
	valid := grabJSON(rid(), pin, ip, okItems)
	for i, a := range []struct {
		token, auth string
	}{{"", ""}, {"wrong-token", ""}, {checkout[:len(checkout)-1], ""}, {checkout + "x", ""}, {viewer, ""}, {admin, ""},
		{"", "Basic " + checkout}, {"", "Bearer"}, {"", "Bearer "}, {"", "bearer " + checkout}, {"", checkout}} {
		cs = append(cs, hostileCase{name: fmt.Sprintf("token #%d", i), service: "grab", method: "POST", path: "/v1/grab",
			token: a.token, auth: a.auth, body: valid, want: 401})
	}
	cs = append(cs, hostileCase{name: "cancel without token", service: "grab", method: "POST", path: "/v1/grab/" + g1.RequestID + "/cancel",
		body: []byte(`{"pin":` + q(g1.Pin) + `}`), want: 401})

	// Replayed and conflicting requestIds.
	body1 := grabBody(g1)
	body2 := grabBody(g2)
	cs = append(cs,
		hostileCase{name: "replay of a granted grab", service: "grab", method: "POST", path: "/v1/grab", token: checkout, body: body1, want: 200},
		hostileCase{name: "replay of a returned grab", service: "grab", method: "POST", path: "/v1/grab", token: checkout, body: body2, want: 409},
		hostileCase{name: "requestId reused, other num", service: "grab", method: "POST", path: "/v1/grab", token: checkout, want: 409,
			body: grabJSON(q(g1.RequestID), q(g1.Pin), q(g1.IP), "["+item(canary.PromoID, canary.Type, 2)+"]")},
		hostileCase{name: "requestId reused, other pin", service: "grab", method: "POST", path: "/v1/grab", token: checkout, want: 409,
			body: grabJSON(q(g1.RequestID), q(g1.Pin+"x"), q(g1.IP), okItems)},
		hostileCase{name: "requestId reused, other promotion", service: "grab", method: "POST", path: "/v1/grab", token: checkout, want: 409,
			body: grabJSON(q(g1.RequestID), q(g1.Pin), q(g1.IP), "["+item(canary.PromoID+"-other", canary.Type, 1)+"]")},
		hostileCase{name: "cancel with another pin", service: "grab", method: "POST", path: "/v1/grab/" + g1.RequestID + "/cancel", token: checkout,
			body: []byte(`{"pin":` + q(g1.Pin+"x") + `}`), want: 404},
		hostileCase{name: "cancel of an unknown grab", service: "grab", method: "POST", path: "/v1/grab/" + run + "-hx-none/cancel", token: checkout,
			body: []byte(`{"pin":` + q(g1.Pin) + `}`), want: 404},
		hostileCase{name: "cancel replay", service: "grab", method: "POST", path: "/v1/grab/" + g2.RequestID + "/cancel", token: checkout,
			body: []byte(`{"pin":` + q(g2.Pin) + `}`), want: 200},
		hostileCase{name: "cancel with a bad reason", service: "grab", method: "POST", path: "/v1/grab/" + g1.RequestID + "/cancel", token: checkout,
			body: []byte(`{"pin":` + q(g1.Pin) + `,"reason":"FREE_MONEY"}`), want: 400},
		hostileCase{name: "cancel with unknown field", service: "grab", method: "POST", path: "/v1/grab/" + g1.RequestID + "/cancel", token: checkout,
			body: []byte(`{"pin":` + q(g1.Pin) + `,"refund":100}`), want: 400},
		hostileCase{name: "cancel without body", service: "grab", method: "POST", path: "/v1/grab/" + g1.RequestID + "/cancel", token: checkout, want: 400},
		// Confirms of held grants: g1 has no hold (it confirms, changing nothing), g2 was returned.
		hostileCase{name: "confirm without token", service: "grab", method: "POST", path: "/v1/grab/" + g1.RequestID + "/confirm",
			body: []byte(`{"pin":` + q(g1.Pin) + `}`), want: 401},
		hostileCase{name: "confirm with another pin", service: "grab", method: "POST", path: "/v1/grab/" + g1.RequestID + "/confirm", token: checkout,
			body: []byte(`{"pin":` + q(g1.Pin+"x") + `}`), want: 404},
		hostileCase{name: "confirm of an unknown grab", service: "grab", method: "POST", path: "/v1/grab/" + run + "-hx-none/confirm", token: checkout,
			body: []byte(`{"pin":` + q(g1.Pin) + `}`), want: 404},
		hostileCase{name: "confirm of a returned grab", service: "grab", method: "POST", path: "/v1/grab/" + g2.RequestID + "/confirm", token: checkout,
			body: []byte(`{"pin":` + q(g2.Pin) + `}`), want: 409},
		hostileCase{name: "confirm with unknown field", service: "grab", method: "POST", path: "/v1/grab/" + g1.RequestID + "/confirm", token: checkout,
			body: []byte(`{"pin":` + q(g1.Pin) + `,"paid":true}`), want: 400},
		hostileCase{name: "confirm without body", service: "grab", method: "POST", path: "/v1/grab/" + g1.RequestID + "/confirm", token: checkout, want: 400},
	)
	for i, hold := range []string{"0", "-5", "86401", "1.5", `"60"`, "1e3"} {
		body := `{"requestId":` + q(fmt.Sprintf("%s-hx-hold-%d", run, i)) + `,"pin":"p","ip":"10.98.0.9","holdSeconds":` + hold + `,"items":` + okItems + `}`
		cs = append(cs, hostileCase{name: "holdSeconds " + hold, service: "grab", method: "POST", path: "/v1/grab", token: checkout, body: []byte(body), want: 400})
	}
	for i, p := range []string{"/v1/grab/a%20b/cancel", "/v1/grab/" + strings.Repeat("r", 129) + "/cancel", "/v1/grab/..%2F..%2Fx/cancel", "/v1/grab/%7Bx%7D/cancel"} {
		cs = append(cs, hostileCase{name: fmt.Sprintf("cancel path #%d", i), service: "grab", method: "POST", path: p, token: checkout,
			body: []byte(`{"pin":"a"}`)})
	}
	// Methods, routes and the public status route.
	for i, c := range []struct{ method, path string }{
		{"GET", "/v1/grab"}, {"PUT", "/v1/grab"}, {"DELETE", "/v1/grab"}, {"POST", "/v1/grab/"}, {"GET", "/v1/grab/" + g1.RequestID + "/cancel"},
		{"POST", "/v1/nothing"}, {"GET", "/v1/promotions/a%20b/1/status"}, {"GET", "/v1/promotions/x/abc/status"},
		{"GET", "/v1/promotions/x/99999999999999999999/status"}, {"GET", "/v1/promotions/x/0/status"},
		{"GET", "/v1/promotions/" + strings.Repeat("a", 65) + "/1/status"}, {"POST", "/v1/promotions/x/1/status"},
	} {
		cs = append(cs, hostileCase{name: fmt.Sprintf("route #%d %s %s", i, c.method, c.path), service: "grab", method: c.method, path: c.path, token: checkout, body: valid})
	}
	cs = append(cs, hostileCase{name: "header block too large", service: "grab", method: "POST", path: "/v1/grab", token: checkout, body: valid,
		header: map[string]string{"X-Padding": strings.Repeat("h", 40<<10)}, want: 431, plain: true})
	for _, v := range []string{"0", "-1", "first", "1e3", "99999999999999999999"} {
		cs = append(cs, hostileCase{name: "attempt header " + q(v), service: "grab", method: "POST", path: "/v1/grab", token: checkout, body: valid,
			header: map[string]string{"X-Grab-Attempt": v}, want: 400})
	}

	// promo-admin: the merchandiser API refuses bad specs before any write.
	adminCase := func(name, method, path, token string, body string, want int) {
		cs = append(cs, hostileCase{name: "admin " + name, service: "admin", method: method, path: path, token: token, body: []byte(body), want: want})
	}
	hid := func(i int) string { return fmt.Sprintf("%s-hxp%d", run, i) }
	spec := func(i int, extra string) string {
		s := fmt.Sprintf(`{"promoId":%s,"type":1,"total":10,"startAt":"2026-01-01T00:00:00Z","endAt":"2099-01-01T00:00:00Z"`, q(hid(i)))
		return s + extra + "}"
	}
	adminCase("malformed", "POST", "/v1/promotions", admin, `{"promoId":`, 400)
	adminCase("unknown field", "POST", "/v1/promotions", admin, spec(1, `,"discount":99`), 400)
	adminCase("case-folded key", "POST", "/v1/promotions", admin, strings.Replace(spec(2, ""), `"total"`, `"TOTAL"`, 1), 400)
	adminCase("duplicate key", "POST", "/v1/promotions", admin, spec(3, `,"total":1000000`), 400)
	adminCase("total as string", "POST", "/v1/promotions", admin, strings.Replace(spec(4, ""), `"total":10`, `"total":"10"`, 1), 400)
	adminCase("total 0", "POST", "/v1/promotions", admin, strings.Replace(spec(5, ""), `"total":10`, `"total":0`, 1), 400)
	adminCase("total negative", "POST", "/v1/promotions", admin, strings.Replace(spec(6, ""), `"total":10`, `"total":-5`, 1), 400)
	adminCase("total too large", "POST", "/v1/promotions", admin, strings.Replace(spec(7, ""), `"total":10`, `"total":1000000000000`, 1), 400)
	adminCase("bad startAt", "POST", "/v1/promotions", admin, strings.Replace(spec(8, ""), `2026-01-01T00:00:00Z`, `yesterday`, 1), 400)
	adminCase("end before start", "POST", "/v1/promotions", admin, strings.Replace(spec(9, ""), `2099-01-01T00:00:00Z`, `2025-01-01T00:00:00Z`, 1), 400)
	adminCase("invalid promoId", "POST", "/v1/promotions", admin, strings.Replace(spec(10, ""), q(hid(10)), `"{C_x}"`, 1), 400)
	adminCase("type 0", "POST", "/v1/promotions", admin, strings.Replace(spec(11, ""), `"type":1`, `"type":0`, 1), 400)
	adminCase("negative limit", "POST", "/v1/promotions", admin, spec(12, `,"perPinLimit":-1`), 400)
	adminCase("negative rate limit", "POST", "/v1/promotions", admin, spec(13, `,"rateLimit":{"limit":-1}`), 400)
	adminCase("rate limit without limit", "POST", "/v1/promotions", admin, spec(14, `,"rateLimit":{}`), 400)
	adminCase("title too long", "POST", "/v1/promotions", admin, spec(15, `,"title":`+q(strings.Repeat("t", 1000))), 400)
	adminCase("maxPerGrab 0", "POST", "/v1/promotions", admin, spec(16, `,"maxPerGrab":0`), 400)
	adminCase("oversized", "POST", "/v1/promotions", admin, spec(17, `,"title":`+q(strings.Repeat("t", 70<<10))), 413)
	adminCase("viewer writes", "POST", "/v1/promotions", viewer, spec(18, ""), 403)
	adminCase("checkout token", "POST", "/v1/promotions", checkout, spec(19, ""), 401)
	adminCase("no token", "POST", "/v1/promotions", "", spec(20, ""), 401)
	adminCase("patch unknown", "PATCH", "/v1/promotions/"+hid(21)+"/1", admin, `{"total":5}`, 404)
	adminCase("patch wrong type", "PATCH", "/v1/promotions/"+url.PathEscape(canary.PromoID)+fmt.Sprintf("/%d", canary.Type), admin, `{"total":"many"}`, 400)
	adminCase("patch unknown field", "PATCH", "/v1/promotions/"+url.PathEscape(canary.PromoID)+fmt.Sprintf("/%d", canary.Type), admin, `{"remaining":1000000}`, 400)
	adminCase("patch below granted", "PATCH", "/v1/promotions/"+url.PathEscape(canary.PromoID)+fmt.Sprintf("/%d", canary.Type), admin, `{"total":0}`, 400)
	adminCase("stop with viewer", "POST", "/v1/promotions/"+url.PathEscape(canary.PromoID)+fmt.Sprintf("/%d/stop", canary.Type), viewer, `{}`, 403)
	adminCase("delete with bad type", "DELETE", "/v1/promotions/x/abc", admin, ``, 400)
	adminCase("get invalid id", "GET", "/v1/promotions/a%20b/1", admin, ``, 400)
	adminCase("list bad limit", "GET", "/v1/promotions?limit=-5", admin, ``, 400)
	adminCase("list bad cursor", "GET", "/v1/promotions?cursor=%00%00", admin, ``, 400)
	return cs
}

// grabBody is the exact body a load request was sent with.
func grabBody(r *checker.Request) []byte {
	var items []map[string]any
	for _, it := range r.Items {
		items = append(items, map[string]any{"promoId": it.PromoID, "type": it.Type, "num": it.Num})
	}
	b, _ := json.Marshal(map[string]any{"requestId": r.RequestID, "pin": r.Pin, "ip": r.IP, "items": items})
	return b
}

// send performs one hostile case and checks its answer.
func (h *hostileResult) send(client *http.Client, bases map[string]string, c hostileCase, mu *sync.Mutex) {
	req, err := http.NewRequest(c.method, bases[c.service]+c.path, bytes.NewReader(c.body))
	if err != nil {
		// A path net/http itself refuses to build is not a request a client can send.
		return
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	} else if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if len(c.body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	mu.Lock()
	defer mu.Unlock()
	h.tried++
	if err != nil {
		h.find("%s: no answer: %v", c.name, err)
		return
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	raw = bytes.TrimSpace(raw)
	var e struct {
		Code    string `json:"code"`
		Result  string `json:"result"`
		Message string `json:"message"`
	}
	jsonErr := json.Unmarshal(raw, &e)
	switch {
	case resp.StatusCode >= 500:
		h.find("%s: answered %d (a 5xx for bad input): %.200s", c.name, resp.StatusCode, raw)
	case c.want != 0 && resp.StatusCode != c.want:
		h.find("%s: answered %d, want %d: %.200s", c.name, resp.StatusCode, c.want, raw)
	case c.want == 0 && (resp.StatusCode < 400 || resp.StatusCode >= 500):
		h.find("%s: answered %d, want a 4xx: %.200s", c.name, resp.StatusCode, raw)
	case c.plain:
	case resp.StatusCode >= 400 && (jsonErr != nil || e.Message == "" || (e.Code == "" && e.Result == "")):
		h.find("%s: %d without a clear message (want the contract's Error body): %.200s", c.name, resp.StatusCode, raw)
	}
}

// slowClients opens n connections that send their headers one byte at a time, and
// reports those the server kept open longer than limit (a slowloris attack pins
// one goroutine and one socket per connection for as long as the server waits).
func slowClients(addr string, n int, limit time.Duration) (tried int, held []string) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			slowBody := i%2 == 1
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				mu.Lock()
				held = append(held, fmt.Sprintf("slow client %d: dial: %v", i, err))
				mu.Unlock()
				return
			}
			defer c.Close()
			start := time.Now()
			head := "POST /v1/grab HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer x\r\nX-Slow: "
			if slowBody {
				head = "POST /v1/grab HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"requestId\":"
			}
			_, _ = c.Write([]byte(head))
			closed := make(chan struct{})
			go func() {
				_, _ = io.Copy(io.Discard, bufio.NewReader(c))
				close(closed)
			}()
			t := time.NewTicker(300 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-closed:
					if took := time.Since(start); took > limit {
						mu.Lock()
						held = append(held, fmt.Sprintf("slow client %d (slow body %v): held open %s, limit %s", i, slowBody, took.Round(100*time.Millisecond), limit))
						mu.Unlock()
					}
					return
				case <-t.C:
					if time.Since(start) > 3*limit {
						mu.Lock()
						held = append(held, fmt.Sprintf("slow client %d (slow body %v): still open after %s", i, slowBody, time.Since(start).Round(time.Second)))
						mu.Unlock()
						return
					}
					_ = c.SetWriteDeadline(time.Now().Add(time.Second))
					_, _ = c.Write([]byte("a"))
				}
			}
		}(i)
	}
	wg.Wait()
	return n, held
}

// canaryState is everything the storm must leave as it was.
type canaryState struct {
	Hash, Pins, IPs, Ledger map[string]string
	Pending                 []string
}

func readCanary(ctx context.Context, c redis.UniversalClient, key string) (canaryState, error) {
	var s canaryState
	var err error
	if s.Hash, err = c.HGetAll(ctx, key).Result(); err != nil {
		return s, err
	}
	if s.Pins, err = c.HGetAll(ctx, promo.PinsKey(key)).Result(); err != nil {
		return s, err
	}
	if s.IPs, err = c.HGetAll(ctx, promo.IPsKey(key)).Result(); err != nil {
		return s, err
	}
	if s.Ledger, err = c.HGetAll(ctx, promo.LedgerKey(key)).Result(); err != nil {
		return s, err
	}
	s.Pending, err = c.ZRange(ctx, promo.PendingKey(key), 0, -1).Result()
	return s, err
}

// diffCanary names what changed.
func diffCanary(before, after canaryState) []string {
	var out []string
	for name, pair := range map[string][2]map[string]string{"hash": {before.Hash, after.Hash}, "pins": {before.Pins, after.Pins},
		"ips": {before.IPs, after.IPs}, "ledger": {before.Ledger, after.Ledger}} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			for k, v := range pair[1] {
				if pair[0][k] != v {
					out = append(out, fmt.Sprintf("canary %s field %s: %q -> %q", name, k, pair[0][k], v))
				}
			}
			for k, v := range pair[0] {
				if _, ok := pair[1][k]; !ok {
					out = append(out, fmt.Sprintf("canary %s field %s: %q removed", name, k, v))
				}
			}
		}
	}
	if !reflect.DeepEqual(before.Pending, after.Pending) {
		out = append(out, fmt.Sprintf("canary pending set %v -> %v", before.Pending, after.Pending))
	}
	return out
}

// indexShard is the client of the shard that holds requestId's request index entry.
func indexShard(shards []redis.UniversalClient, rid string) redis.UniversalClient {
	return shards[ring.Default.Shard(promo.RequestIndexKey(rid))]
}

// rawCases are requests no well-behaved client library would send, written to the
// socket as they are: request smuggling shapes, broken framing. Each must get a 4xx
// (net/http answers these itself, in plain text) and change nothing.
func rawCases(host string, validBody string) map[string]string {
	cl := fmt.Sprint(len(validBody))
	return map[string]string{
		"raw: Content-Length and Transfer-Encoding both": "POST /v1/grab HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: " + cl +
			"\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"raw: two different Content-Lengths": "POST /v1/grab HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 5\r\nContent-Length: " + cl +
			"\r\n\r\n" + validBody,
		"raw: no Host header":           "POST /v1/grab HTTP/1.1\r\nContent-Length: " + cl + "\r\n\r\n" + validBody,
		"raw: a space in the method":    "PO ST /v1/grab HTTP/1.1\r\nHost: " + host + "\r\n\r\n",
		"raw: a header without a colon": "POST /v1/grab HTTP/1.1\r\nHost: " + host + "\r\nAuthorization Bearer x\r\n\r\n",
		"raw: request line of 64 KiB":   "GET /" + strings.Repeat("a", 64<<10) + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n",
		"raw: unknown protocol version": "POST /v1/grab HTTP/9.9\r\nHost: " + host + "\r\n\r\n",
		"raw: bad chunk size":           "POST /v1/grab HTTP/1.1\r\nHost: " + host + "\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + validBody + "\r\n0\r\n\r\n",
	}
}

// sendRaw writes one raw request and reads the status code of the answer.
func sendRaw(addr, raw string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(raw)); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
