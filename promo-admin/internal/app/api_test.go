package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

const (
	admin  = admintest.AdminToken
	viewer = admintest.ViewerToken
)

func uid(name string) string { return name + "-" + testenv.Suffix() }

func path(id string) string { return "/v1/promotions/" + id + "/1" }

func TestLifecycle(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	id := uid("life")
	spec := e.Spec(id)
	key := lifecycleCreate(t, e, id, spec)
	lifecyclePatch(t, e, id)
	lifecycleStop(t, e, id)
	lifecycleDelete(t, e, id, key)
	lifecycleDeleted(t, e, id, spec)
}

// lifecycleCreate creates id, reads it with either token and returns its key.
func lifecycleCreate(t *testing.T, e *admintest.Env, id string, spec map[string]any) string {
	t.Helper()
	r := e.Do(http.MethodPost, "/v1/promotions", admin, spec)
	if r.Status != http.StatusCreated {
		t.Fatalf("create: %s", r)
	}
	p := r.Promotion()
	key := promo.Key(id, 1)
	if p.PromoID != id || p.Type != 1 || p.Total != 100 || p.Remaining != 100 || p.Granted != 0 ||
		p.State != promo.Active || p.Key != key || p.Shard != ring.Default.Shard(key) ||
		p.PerPinLimit != 2 || p.PerIPLimit != 10 || p.MaxPerGrab != 2 || p.Title != "promotion "+id ||
		p.RateLimit == nil || p.RateLimit.Limit != 1000 || p.RateLimit.WindowSeconds != 60 || p.CreatedAt.IsZero() {
		t.Errorf("created: %s", r.Body)
	}
	e.Agree(id, 1)

	for _, tok := range []string{admin, viewer} {
		r = e.Do(http.MethodGet, path(id), tok, nil)
		if r.Status != http.StatusOK || r.Promotion().Total != 100 || r.Promotion().Key != key {
			t.Errorf("get with %s: %s", tok, r)
		}
	}

	return key
}

// lifecyclePatch changes every field a patch may, then lists.
func lifecyclePatch(t *testing.T, e *admintest.Env, id string) {
	t.Helper()
	r := e.Do(http.MethodPatch, path(id), admin, map[string]any{
		"total": 150, "perPinLimit": 3, "perIpLimit": 0, "rateLimit": map[string]any{"limit": 7},
		"endAt": e.Clock.Now().Add(48 * time.Hour).Format(time.RFC3339),
	})
	p := r.Promotion()
	if r.Status != http.StatusOK || p.Total != 150 || p.Remaining != 150 || p.PerPinLimit != 3 || p.PerIPLimit != 0 ||
		p.RateLimit == nil || p.RateLimit.Limit != 7 || p.RateLimit.WindowSeconds != 60 || p.MaxPerGrab != 2 {
		t.Errorf("patch: %s", r)
	}
	e.Agree(id, 1)

	r = e.Do(http.MethodGet, "/v1/promotions", viewer, nil)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"promoId":"`+id+`"`) {
		t.Errorf("list: %s", r)
	}

}

// lifecycleStop stops id, twice, and a patch of it is then STOPPED.
func lifecycleStop(t *testing.T, e *admintest.Env, id string) {
	t.Helper()
	r := e.Do(http.MethodPost, path(id)+"/stop", admin, map[string]any{"reason": "price error"})
	if r.Status != http.StatusOK || r.Promotion().State != promo.Stopped {
		t.Errorf("stop: %s", r)
	}
	e.Agree(id, 1)
	row, _ := e.Row(id, 1)
	// Stop is idempotent: again, with no body, changes nothing.
	r = e.Do(http.MethodPost, path(id)+"/stop", admin, nil)
	if r.Status != http.StatusOK || r.Promotion().State != promo.Stopped {
		t.Errorf("second stop: %s", r)
	}
	if again, _ := e.Row(id, 1); again.Version != row.Version {
		t.Errorf("second stop changed the version from %d to %d", row.Version, again.Version)
	}
	r = e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 10})
	if r.Status != http.StatusConflict || r.Error().Code != "STOPPED" {
		t.Errorf("patch of a stopped promotion: %s", r)
	}

}

// lifecycleDelete deletes id: its row stays DELETED, its keys leave Redis.
func lifecycleDelete(t *testing.T, e *admintest.Env, id, key string) {
	t.Helper()
	r := e.Do(http.MethodDelete, path(id), admin, nil)
	if r.Status != http.StatusNoContent || len(r.Body) != 0 {
		t.Errorf("delete: %s", r)
	}
	row, _ := e.Row(id, 1)
	if row.State != promo.Deleted {
		t.Errorf("row after delete: state %s, want DELETED", row.State)
	}
	for _, k := range promo.Keys(key) {
		shard, _ := e.App.Pool.For(key)
		if n, _ := e.Shard(shard).Exists(context.Background(), k).Result(); n != 0 {
			t.Errorf("%s is still in Redis after delete", k)
		}
	}
	e.Agree(id, 1)

}

// lifecycleDeleted checks a deleted promotion is NOT_FOUND everywhere, listed
// only when asked for, and its id not reused.
func lifecycleDeleted(t *testing.T, e *admintest.Env, id string, spec map[string]any) {
	t.Helper()
	// Deleted: NOT_FOUND everywhere, hidden from the list unless asked for.
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, path(id)}, {http.MethodPatch, path(id)},
		{http.MethodPost, path(id) + "/stop"}, {http.MethodDelete, path(id)},
	} {
		var body any
		if c.method == http.MethodPatch {
			body = map[string]any{"total": 5}
		}
		if r := e.Do(c.method, c.path, admin, body); r.Status != http.StatusNotFound || r.Error().Code != "NOT_FOUND" {
			t.Errorf("%s %s after delete: %s", c.method, c.path, r)
		}
	}
	if r := e.Do(http.MethodGet, "/v1/promotions", admin, nil); strings.Contains(string(r.Body), id) {
		t.Errorf("list shows a deleted promotion: %s", r)
	}
	if r := e.Do(http.MethodGet, "/v1/promotions?state=DELETED", admin, nil); !strings.Contains(string(r.Body), `"state":"DELETED"`) || !strings.Contains(string(r.Body), id) {
		t.Errorf("list state=DELETED: %s", r)
	}
	// A deleted promotion's id cannot be reused: its flow log stays under it.
	if r := e.Do(http.MethodPost, "/v1/promotions", admin, spec); r.Status != http.StatusConflict || r.Error().Code != "ALREADY_EXISTS" {
		t.Errorf("create over a deleted promotion: %s", r)
	}
}

func TestCreateTwiceIsAlreadyExists(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	id := uid("twice")
	e.Create(id)
	before := e.Snapshot(store.ID{PromoID: id, Type: 1})
	r := e.Do(http.MethodPost, "/v1/promotions", admin, e.Spec(id))
	if r.Status != http.StatusConflict || r.Error().Code != "ALREADY_EXISTS" {
		t.Errorf("second create: %s", r)
	}
	if after := e.Snapshot(store.ID{PromoID: id, Type: 1}); after != before {
		t.Errorf("a refused create changed something:\nbefore %s\nafter  %s", before, after)
	}
}

func TestDefaultsOfOptionalFields(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	id := uid("min")
	now := e.Clock.Now().UTC()
	r := e.Do(http.MethodPost, "/v1/promotions", admin, map[string]any{
		"promoId": id, "type": 99, "total": 1,
		"startAt": now.Add(time.Hour).Format(time.RFC3339), "endAt": now.Add(2 * time.Hour).Format(time.RFC3339),
	})
	p := r.Promotion()
	if r.Status != http.StatusCreated || p.MaxPerGrab != 1 || p.PerPinLimit != 0 || p.RateLimit != nil || p.State != promo.Scheduled {
		t.Errorf("minimal create: %s", r)
	}
	e.Agree(id, 99)
	r = e.Do(http.MethodPatch, "/v1/promotions/"+id+"/99", admin, map[string]any{"rateLimit": map[string]any{"limit": 3, "windowSeconds": 10}})
	if p := r.Promotion(); r.Status != http.StatusOK || p.RateLimit == nil || p.RateLimit.WindowSeconds != 10 {
		t.Errorf("patch rate limit: %s", r)
	}
	e.Agree(id, 99)
}

// The hash lands on the shard the ring names, on that server and on no other.
func TestHashLandsOnTheRingShard(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	ctx := context.Background()
	shards := map[int]bool{}
	for i := 0; i < 12; i++ {
		id := uid(fmt.Sprintf("ring%d", i))
		p := e.Create(id)
		key := promo.Key(id, 1)
		want := ring.Default.Shard(key)
		shards[want] = true
		if p.Shard != want {
			t.Errorf("%s: answer names shard %d, the ring %d", key, p.Shard, want)
		}
		for s := 0; s < ring.Shards; s++ {
			n, err := e.Shard(s).Exists(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if (s == want) != (n == 1) {
				t.Errorf("%s on shard %d (%s): exists=%d, the ring names shard %d", key, s, e.Addrs[s], n, want)
			}
		}
		e.Agree(id, 1)
	}
	if len(shards) < 3 {
		t.Errorf("12 promotions landed on only %d shards", len(shards))
	}
}

func TestListPagesNewestFirst(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	var want []string
	for i := 0; i < 7; i++ {
		id := uid(fmt.Sprintf("page%d", i))
		e.Create(id)
		want = append([]string{id}, want...)
		e.Clock.Advance(time.Millisecond) // distinct creation instants
	}
	var have []string
	cursor := ""
	for pages := 1; ; pages++ {
		q := "/v1/promotions?limit=3"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := e.Do(http.MethodGet, q, viewer, nil)
		if r.Status != http.StatusOK {
			t.Fatalf("page %d: %s", pages, r)
		}
		m := r.JSON()
		items, _ := m["items"].([]any)
		if len(items) > 3 {
			t.Fatalf("page %d holds %d items, limit 3", pages, len(items))
		}
		for _, it := range items {
			have = append(have, it.(map[string]any)["promoId"].(string))
		}
		next, _ := m["nextCursor"].(string)
		if next == "" {
			if pages != 3 {
				t.Errorf("want 3 pages, have %d", pages)
			}
			break
		}
		if pages > 5 {
			t.Fatal("the pages do not end")
		}
		cursor = next
	}
	if fmt.Sprint(have) != fmt.Sprint(want) {
		t.Errorf("pages:\nwant %v\nhave %v", want, have)
	}
	// Filters: one stopped.
	e.Do(http.MethodPost, path(want[0])+"/stop", admin, nil)
	r := e.Do(http.MethodGet, "/v1/promotions?state=STOPPED", viewer, nil)
	if items, _ := r.JSON()["items"].([]any); len(items) != 1 {
		t.Errorf("state=STOPPED: %s", r)
	}
	r = e.Do(http.MethodGet, "/v1/promotions?state=ACTIVE&limit=500", viewer, nil)
	if items, _ := r.JSON()["items"].([]any); len(items) != 6 {
		t.Errorf("state=ACTIVE: want 6 items: %s", r)
	}
	r = e.Do(http.MethodGet, "/v1/promotions?state=SCHEDULED", viewer, nil)
	if items, _ := r.JSON()["items"].([]any); r.Status != http.StatusOK || len(items) != 0 {
		t.Errorf("state=SCHEDULED: want none: %s", r)
	}
}

// A total below what is granted is refused by the shard and changes nothing.
func TestPatchBelowGranted(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	id := uid("granted")
	e.Create(id)
	key := promo.Key(id, 1)
	shard, _ := e.App.Pool.For(key)
	for i, pin := range []string{"p1", "p2"} {
		rep, err := lua.Grab(context.Background(), e.Shard(shard), lua.GrabCall{
			NowMs: e.Clock.Now().UnixMilli(), DeadlineMs: e.Clock.Now().Add(time.Minute).UnixMilli(),
			RequestID: fmt.Sprintf("%s-r%d", id, i), BodyHash: "h", Pin: pin, IP: "10.0.0.1",
			RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 2}},
		})
		if err != nil || rep.Code != lua.CodeOK {
			t.Fatalf("grab: %+v %v", rep, err)
		}
	}
	r := e.Do(http.MethodGet, path(id), viewer, nil)
	if p := r.Promotion(); p.Granted != 4 || p.Remaining != 96 {
		t.Errorf("live counters after 4 granted: %s", r)
	}
	before := e.Snapshot(store.ID{PromoID: id, Type: 1})
	r = e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 3})
	if r.Status != http.StatusConflict || r.Error().Code != "BELOW_GRANTED" {
		t.Errorf("total 3 with 4 granted: %s", r)
	}
	if after := e.Snapshot(store.ID{PromoID: id, Type: 1}); after != before {
		t.Errorf("a refused patch changed something:\nbefore %s\nafter  %s", before, after)
	}
	r = e.Do(http.MethodPatch, path(id), admin, map[string]any{"total": 4})
	if p := r.Promotion(); r.Status != http.StatusOK || p.Remaining != 0 || p.Granted != 4 || p.State != promo.SoldOut {
		t.Errorf("total 4 with 4 granted: %s", r)
	}
	e.Agree(id, 1)
	row, _ := e.Row(id, 1)
	// The record's remaining moves by the change of total: the flow sink, not the
	// patch, counts the 4 granted there.
	if row.Remaining != 4 {
		t.Errorf("record's remaining after total 100->4 with nothing counted by the record yet: want 4, have %d", row.Remaining)
	}
}

func TestHealthReadinessMetrics(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	if r := e.Do(http.MethodGet, "/healthz", "", nil); r.Status != http.StatusOK {
		t.Errorf("healthz: %s", r)
	}
	if r := e.Do(http.MethodGet, "/readyz", "", nil); r.Status != http.StatusOK {
		t.Errorf("readyz: %s", r)
	}
	e.Do(http.MethodGet, "/v1/promotions", viewer, nil)
	if r := e.Do(http.MethodGet, "/metrics", "", nil); r.Status != http.StatusNotFound {
		t.Errorf("the API's listener serves /metrics: %s", r)
	}
	for path, want := range map[string]string{
		"/metrics": `flashsale_promo_admin_http_requests_total{code="200",route="GET /v1/promotions"} 1`,
		"/readyz":  `"status":"ready"`,
	} {
		resp, err := http.Get(e.Ops.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("ops listener %s: %d, lacks %s: %.400s", path, resp.StatusCode, want, body)
		}
	}
	// The request id is echoed.
	req, _ := http.NewRequest(http.MethodGet, e.Server.URL+"/healthz", nil)
	req.Header.Set("X-Request-Id", "abc-123")
	resp, err := e.Server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Request-Id") != "abc-123" {
		t.Errorf("X-Request-Id not echoed: %q", resp.Header.Get("X-Request-Id"))
	}
}

func TestReadinessNamesAFailingShard(t *testing.T) {
	t.Parallel()
	addrs := append([]string(nil), testenv.Stack(t).Redis...)
	addrs[9] = "127.0.0.1:1" // nothing listens there
	e := admintest.Start(t, admintest.Options{RedisAddrs: addrs})
	// The public listener says only "not ready"; the names are the ops listener's.
	if r := e.Do(http.MethodGet, "/readyz", "", nil); r.Status != http.StatusServiceUnavailable || strings.Contains(string(r.Body), "redis") {
		t.Errorf("public readyz with shard 9 down: %s", r)
	}
	r := admintest.Response{}
	if resp, err := http.Get(e.Ops.URL + "/readyz"); err == nil {
		r.Status = resp.StatusCode
		r.Body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "redis shard 9") {
		t.Errorf("readyz with shard 9 down: %s", r)
	}
	if strings.Contains(string(r.Body), "redis shard 8 ") {
		t.Errorf("readyz names a live shard: %s", r)
	}
}

func TestUnknownRoutesAnswerTheErrorBody(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	if r := e.Do(http.MethodGet, "/v2/nothing", admin, nil); r.Status != http.StatusNotFound || r.Error().Code != "NOT_FOUND" {
		t.Errorf("unknown path: %s", r)
	}
	if r := e.Do(http.MethodPut, "/v1/promotions", admin, nil); r.Status != http.StatusMethodNotAllowed || r.Error().Code == "" {
		t.Errorf("unknown method: %s", r)
	}
}

// The audit trail: every change that landed, newest first, with who made it and
// the promotion before and after; a change the shard refused leaves no entry, the
// history outlives the delete, and viewers may read it.
func TestHistory(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	id := uid("audit")
	e.Create(id)
	key := promo.Key(id, 1)
	now := time.Now()
	// Two units taken, so a PATCH to total 1 is refused below what is granted.
	if r, err := lua.Grab(context.Background(), e.Shard(ring.Default.Shard(key)), lua.GrabCall{NowMs: now.UnixMilli(),
		DeadlineMs: now.Add(time.Hour).UnixMilli(), RequestID: "r-" + id, BodyHash: "h", Pin: "p", IP: "i",
		RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 2}}}); err != nil || r.Code != lua.CodeOK {
		t.Fatalf("grab: %+v %v", r, err)
	}
	for _, st := range []struct {
		method, path string
		body         any
		status       int
	}{
		{http.MethodPatch, path(id), map[string]any{"total": 150}, http.StatusOK},
		{http.MethodPatch, path(id), map[string]any{"total": 1}, http.StatusConflict}, // refused: no entry
		{http.MethodPost, path(id) + "/stop", nil, http.StatusOK},
		{http.MethodDelete, path(id), nil, http.StatusNoContent},
	} {
		if r := e.Do(st.method, st.path, admin, st.body); r.Status != st.status {
			t.Fatalf("%s %s: %s, want %d", st.method, st.path, r, st.status)
		}
	}
	checkAuditTrail(t, e.Do(http.MethodGet, path(id)+"/history", viewer, nil))
	if r := e.Do(http.MethodGet, path(uid("never"))+"/history", admin, nil); r.Status != http.StatusNotFound {
		t.Errorf("history of a promotion never created: %s, want 404", r)
	}
}

// checkAuditTrail checks the history of a promotion created, patched, refused a
// patch, stopped and deleted by the merchandiser: four entries, newest first.
func checkAuditTrail(t *testing.T, r admintest.Response) {
	t.Helper()
	var h struct {
		Entries []struct {
			At     time.Time `json:"at"`
			Actor  struct{ Name, Role string }
			Action string
			Before *struct {
				State   string
				Version int64
				Total   int64
			}
			After struct {
				State   string
				Version int64
				Total   int64
			}
		}
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &h) != nil {
		t.Fatalf("history: %s", r)
	}
	want := []struct {
		action              string
		before, after       string // state/total
		beforeVer, afterVer int64
	}{
		{"DELETE", "STOPPED/150", "DELETED/150", 3, 4},
		{"STOP", "ACTIVE/150", "STOPPED/150", 2, 3},
		{"PATCH", "ACTIVE/100", "ACTIVE/150", 1, 2},
		{"CREATE", "", "ACTIVE/100", 0, 1},
	}
	if len(h.Entries) != len(want) {
		t.Fatalf("history has %d entries, want %d: %s", len(h.Entries), len(want), r.Body)
	}
	for i, w := range want {
		en := h.Entries[i]
		before := ""
		if en.Before != nil {
			before = fmt.Sprintf("%s/%d", en.Before.State, en.Before.Total)
			if en.Before.Version != w.beforeVer {
				t.Errorf("entry %d: before version %d, want %d", i, en.Before.Version, w.beforeVer)
			}
		}
		after := fmt.Sprintf("%s/%d", en.After.State, en.After.Total)
		if en.Action != w.action || before != w.before || after != w.after || en.After.Version != w.afterVer ||
			en.Actor.Role != "merchandiser" || en.Actor.Name != "test-merchandiser" || en.At.IsZero() {
			t.Errorf("entry %d: %s %q -> %q by %+v at %s, want %s %q -> %q by the merchandiser's token",
				i, en.Action, before, after, en.Actor, en.At, w.action, w.before, w.after)
		}
		if i > 0 && en.At.After(h.Entries[i-1].At) {
			t.Errorf("entry %d is newer than entry %d", i, i-1)
		}
	}
}

// An archived promotion (recovery archive moved its flow rows out of grab_flow) is
// history: a PATCH, which could reopen its sale against an empty log, is refused
// STOPPED and changes nothing.
func TestPatchOfAnArchivedPromotionIsRefused(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	id := uid("archived")
	e.Create(id)
	key := store.ID{PromoID: id, Type: 1}
	if _, err := e.App.Store.DB().ExecContext(context.Background(), `UPDATE promotion SET archived_at = UTC_TIMESTAMP(3) WHERE promo_id = ?`, id); err != nil {
		t.Fatal(err)
	}
	before := e.Snapshot(key)
	r := e.Do(http.MethodPatch, path(id), admin, map[string]any{"endAt": e.Clock.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)})
	if r.Status != http.StatusConflict || r.Error().Code != "STOPPED" || !strings.Contains(r.Error().Message, "archived") {
		t.Errorf("patch of an archived promotion: %s", r)
	}
	if after := e.Snapshot(key); after != before {
		t.Errorf("a refused patch changed something:\nbefore %s\nafter  %s", before, after)
	}
}
