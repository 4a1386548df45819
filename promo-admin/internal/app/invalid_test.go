package app_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// Every refusal of bad input is a 4xx naming the offending field, and changes
// nothing in MySQL or Redis.
func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	id := uid("valid")
	e.Create(id)
	fresh := uid("fresh") // a create of it must never succeed here
	now := e.Clock.Now().UTC()
	cases := append(badCreates(e, fresh, now), badChanges(id, fresh, now)...)
	ids := []store.ID{{PromoID: id, Type: 1}, {PromoID: fresh, Type: 1}, {PromoID: "a_b", Type: 1}}
	before := e.Snapshot(ids...)
	for _, c := range cases {
		r := e.Do(c.method, c.path, admintest.AdminToken, c.body)
		er := r.Error()
		wantCode := "INVALID_REQUEST"
		if c.status == 413 {
			wantCode = "PAYLOAD_TOO_LARGE"
		}
		if r.Status != c.status || er.Code != wantCode || er.Field != c.field || er.Message == "" {
			t.Errorf("%s: want %d %s naming %q, have %s", c.name, c.status, wantCode, c.field, r)
		}
	}
	if after := e.Snapshot(ids...); after != before {
		t.Errorf("bad input changed something:\nbefore %s\nafter  %s", before, after)
	}
	// And the valid request still works afterwards.
	if r := e.Do(http.MethodPost, "/v1/promotions", admintest.AdminToken, specWith(e, fresh)); r.Status != http.StatusCreated {
		t.Errorf("valid create after the refusals: %s", r)
	}
}

// badInput is a request the contract refuses with status, naming field.
type badInput struct {
	name   string
	method string
	path   string
	body   any
	status int
	field  string
}

const post, patch, get, del = http.MethodPost, http.MethodPatch, http.MethodGet, http.MethodDelete

// specWith returns the valid create body of id with fields changed (or removed,
// for nil), given as name, value pairs.
func specWith(e *admintest.Env, id string, kv ...any) map[string]any {
	s := e.Spec(id)
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(s, kv[i].(string))
		} else {
			s[kv[i].(string)] = kv[i+1]
		}
	}
	return s
}

// rl is a JSON object of name, value pairs.
func rl(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// at is now+d in RFC 3339.
func at(now time.Time, d time.Duration) string { return now.Add(d).Format(time.RFC3339) }

// oversized is a body over 64 KiB.
func oversized(fresh string) string {
	return `{"promoId":"` + fresh + `","title":"` + strings.Repeat("x", 70<<10) + `"}`
}

// badCreates are the refused creates of fresh.
func badCreates(e *admintest.Env, fresh string, now time.Time) []badInput {
	with := func(kv ...any) map[string]any { return specWith(e, fresh, kv...) }
	ts := func(d time.Duration) string { return at(now, d) }
	big := oversized(fresh)
	return []badInput{
		// create
		{"unknown field", post, "/v1/promotions", with("colour", "red"), 400, "colour"},
		{"unknown nested field", post, "/v1/promotions", with("rateLimit", rl("limit", 1, "burst", 2)), 400, "burst"},
		{"total not a number", post, "/v1/promotions", with("total", "many"), 400, "total"},
		{"total fractional", post, "/v1/promotions", with("total", 1.5), 400, "total"},
		{"total 0", post, "/v1/promotions", with("total", 0), 400, "total"},
		{"total above 1e9", post, "/v1/promotions", with("total", 1_000_000_001), 400, "total"},
		{"total missing", post, "/v1/promotions", with("total", nil), 400, "total"},
		{"negative perPinLimit", post, "/v1/promotions", with("perPinLimit", -1), 400, "perPinLimit"},
		{"negative perIpLimit", post, "/v1/promotions", with("perIpLimit", -1), 400, "perIpLimit"},
		{"maxPerGrab 0", post, "/v1/promotions", with("maxPerGrab", 0), 400, "maxPerGrab"},
		{"rateLimit.limit 0", post, "/v1/promotions", with("rateLimit", rl("limit", 0)), 400, "rateLimit.limit"},
		{"rateLimit.limit missing", post, "/v1/promotions", with("rateLimit", rl("windowSeconds", 5)), 400, "rateLimit.limit"},
		{"rateLimit window 0", post, "/v1/promotions", with("rateLimit", rl("limit", 1, "windowSeconds", 0)), 400, "rateLimit.windowSeconds"},
		{"rateLimit window 3601", post, "/v1/promotions", with("rateLimit", rl("limit", 1, "windowSeconds", 3601)), 400, "rateLimit.windowSeconds"},
		{"rateLimit not an object", post, "/v1/promotions", with("rateLimit", 5), 400, "rateLimit"},
		{"title of 201 characters", post, "/v1/promotions", with("title", strings.Repeat("限", 201)), 400, "title"},
		{"title not a string", post, "/v1/promotions", with("title", 7), 400, "title"},
		{"promoId with underscore", post, "/v1/promotions", with("promoId", "a_b"), 400, "promoId"},
		{"promoId empty", post, "/v1/promotions", with("promoId", ""), 400, "promoId"},
		{"promoId of 65", post, "/v1/promotions", with("promoId", strings.Repeat("a", 65)), 400, "promoId"},
		{"promoId missing", post, "/v1/promotions", with("promoId", nil), 400, "promoId"},
		{"promoId a number", post, "/v1/promotions", with("promoId", 12), 400, "promoId"},
		{"type 0", post, "/v1/promotions", with("type", 0), 400, "type"},
		{"type 100", post, "/v1/promotions", with("type", 100), 400, "type"},
		{"type a string", post, "/v1/promotions", with("type", "1"), 400, "type"},
		{"type missing", post, "/v1/promotions", with("type", nil), 400, "type"},
		{"startAt not RFC 3339", post, "/v1/promotions", with("startAt", "tomorrow"), 400, "startAt"},
		{"startAt without zone", post, "/v1/promotions", with("startAt", "2030-01-01T00:00:00"), 400, "startAt"},
		{"startAt missing", post, "/v1/promotions", with("startAt", nil), 400, "startAt"},
		{"endAt before startAt", post, "/v1/promotions", with("startAt", ts(2*time.Hour), "endAt", ts(time.Hour)), 400, "endAt"},
		{"endAt equal to startAt", post, "/v1/promotions", with("startAt", ts(time.Hour), "endAt", ts(time.Hour)), 400, "endAt"},
		{"endAt in the past", post, "/v1/promotions", with("startAt", ts(-2*time.Hour), "endAt", ts(-time.Hour)), 400, "endAt"},
		{"endAt missing", post, "/v1/promotions", with("endAt", nil), 400, "endAt"},
		{"body not JSON", post, "/v1/promotions", "promoId=x", 400, ""},
		{"body an array", post, "/v1/promotions", "[1,2]", 400, ""},
		{"body empty", post, "/v1/promotions", "", 400, ""},
		{"two objects", post, "/v1/promotions", `{"promoId":"a"} {}`, 400, ""},
		{"body over 64 KiB", post, "/v1/promotions", big, 413, ""},
	}
}

// badChanges are the refused patches, stops, gets, deletes and lists of id
// (fresh names the oversized body).
func badChanges(id, fresh string, now time.Time) []badInput {
	ts := func(d time.Duration) string { return at(now, d) }
	big := oversized(fresh)
	return []badInput{
		// patch
		{"empty patch", patch, path(id), map[string]any{}, 400, "body"},
		{"patch without body", patch, path(id), nil, 400, ""},
		{"patch of maxPerGrab", patch, path(id), map[string]any{"maxPerGrab": 3}, 400, "maxPerGrab"},
		{"patch of startAt", patch, path(id), map[string]any{"startAt": ts(time.Hour)}, 400, "startAt"},
		{"patch total 0", patch, path(id), map[string]any{"total": 0}, 400, "total"},
		{"patch total above 1e9", patch, path(id), map[string]any{"total": 2_000_000_000}, 400, "total"},
		{"patch total a string", patch, path(id), map[string]any{"total": "10"}, 400, "total"},
		{"patch negative perPinLimit", patch, path(id), map[string]any{"perPinLimit": -3}, 400, "perPinLimit"},
		{"patch negative perIpLimit", patch, path(id), map[string]any{"perIpLimit": -3}, 400, "perIpLimit"},
		{"patch rateLimit.limit 0", patch, path(id), map[string]any{"rateLimit": rl("limit", 0)}, 400, "rateLimit.limit"},
		{"patch endAt in the past", patch, path(id), map[string]any{"endAt": ts(-time.Second)}, 400, "endAt"},
		{"patch endAt before startAt", patch, path(id), map[string]any{"endAt": ts(-2 * time.Minute)}, 400, "endAt"},
		{"patch endAt not a time", patch, path(id), map[string]any{"endAt": "soon"}, 400, "endAt"},
		{"patch over 64 KiB", patch, path(id), big, 413, ""},
		{"patch bad promoId", patch, "/v1/promotions/a_b/1", map[string]any{"total": 5}, 400, "promoId"},
		{"patch type 0", patch, "/v1/promotions/" + id + "/0", map[string]any{"total": 5}, 400, "type"},
		{"patch type x", patch, "/v1/promotions/" + id + "/x", map[string]any{"total": 5}, 400, "type"},
		// stop
		{"stop reason of 201", post, path(id) + "/stop", map[string]any{"reason": strings.Repeat("r", 201)}, 400, "reason"},
		{"stop reason a number", post, path(id) + "/stop", map[string]any{"reason": 1}, 400, "reason"},
		{"stop unknown field", post, path(id) + "/stop", map[string]any{"force": true}, 400, "force"},
		{"stop bad promoId", post, "/v1/promotions/a.b/1/stop", nil, 400, "promoId"},
		{"stop type 100", post, "/v1/promotions/" + id + "/100/stop", nil, 400, "type"},
		// get and delete
		{"get bad promoId", get, "/v1/promotions/" + strings.Repeat("a", 65) + "/1", nil, 400, "promoId"},
		{"get type 100", get, "/v1/promotions/" + id + "/100", nil, 400, "type"},
		{"get type -1", get, "/v1/promotions/" + id + "/-1", nil, 400, "type"},
		{"delete bad promoId", del, "/v1/promotions/a%20b/1", nil, 400, "promoId"},
		{"delete type x", del, "/v1/promotions/" + id + "/x", nil, 400, "type"},
		// list
		{"list limit 0", get, "/v1/promotions?limit=0", nil, 400, "limit"},
		{"list limit 501", get, "/v1/promotions?limit=501", nil, 400, "limit"},
		{"list limit x", get, "/v1/promotions?limit=x", nil, 400, "limit"},
		{"list state lower case", get, "/v1/promotions?state=active", nil, 400, "state"},
		{"list state empty", get, "/v1/promotions?state=", nil, 400, "state"},
		{"list bad cursor", get, "/v1/promotions?cursor=garbage", nil, 400, "cursor"},
	}
}
