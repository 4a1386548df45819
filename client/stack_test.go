package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The local stack (make up) and its development tokens (api/openapi.yaml); the
// FLASHSALE_* variables point the test at another.
func stackEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

var (
	stackGrab     = stackEnv("FLASHSALE_GRAB_URL", "http://127.0.0.1:8080")
	stackAdmin    = stackEnv("FLASHSALE_ADMIN_URL", "http://127.0.0.1:8081")
	checkoutToken = stackEnv("FLASHSALE_CHECKOUT_TOKEN", "dev-checkout-token")
	adminToken    = stackEnv("FLASHSALE_ADMIN_TOKEN", "dev-admin-token")
)

// needStack skips the test when the stack does not answer, outside CI; under CI
// (CI set, as .ci/run sets it) a stack that does not answer fails it.
func needStack(t *testing.T) {
	t.Helper()
	for _, base := range []string{stackGrab, stackAdmin} {
		err := ready(base)
		if err == nil {
			continue
		}
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatalf("the local stack does not answer at %s (%v), and CI=%s: start it with `make up`", base, err, ci)
		}
		t.Skipf("the local stack does not answer at %s (%v): start it with `make up` to run this test (set CI=true to fail instead)", base, err)
	}
}

func ready(base string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/readyz answered %d", resp.StatusCode)
	}
	return nil
}

// TestClientOnLocalStack drives the real paths of both services through the
// client: a promotion created, granted, replayed, refused, read, cancelled,
// held and confirmed, changed, stopped and deleted.
func TestClientOnLocalStack(t *testing.T) {
	needStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var calls atomic.Int64
	obs := ObserverFuncs{Result: func(CallInfo) { calls.Add(1) }}
	admin, err := NewAdmin(Config{BaseURL: stackAdmin, Token: adminToken, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	grab, err := New(Config{BaseURL: stackGrab, Token: checkoutToken, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	run := fmt.Sprintf("client-%d", time.Now().UnixNano())
	now := time.Now().UTC()
	spec := PromotionSpec{PromoID: run, Type: 1, Title: "client component test", Total: 5, PerPinLimit: 1, MaxPerGrab: 1,
		StartAt: now.Add(-time.Second), EndAt: now.Add(time.Hour)}

	stackCreate(ctx, t, admin, spec)
	rid := stackGrants(ctx, t, grab, admin, run)
	stackCancels(ctx, t, grab, run, rid)
	stackHolds(ctx, t, grab, run)

	total := int64(10)
	p, err := admin.Patch(ctx, run, 1, PromotionPatch{Total: &total})
	if err != nil || p.Total != 10 || p.Remaining != 9 {
		t.Fatalf("patch total to 10: %+v %v", p, err)
	}
	if page, err := admin.List(ctx, ListOptions{Limit: 5}); err != nil || len(page.Items) == 0 {
		t.Fatalf("list: %+v %v", page, err)
	}
	if p, err = admin.Stop(ctx, run, 1, "client component test"); err != nil || p.State != StateStopped {
		t.Fatalf("stop: %+v %v", p, err)
	}
	_, err = grab.Grab(ctx, GrabRequest{RequestID: run + "-late", Pin: run + "-late", IP: "10.9.0.3", Items: []Item{{PromoID: run, Type: 1, Num: 1}}})
	if ResultOf(err) != ResultStopped {
		t.Fatalf("grab of a stopped promotion: %v, want STOPPED", err)
	}
	if err := admin.Delete(ctx, run, 1); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := admin.Delete(ctx, run, 1); CodeOf(err) != CodeNotFound {
		t.Fatalf("second delete: %v, want NOT_FOUND", err)
	}
	if calls.Load() < 15 {
		t.Fatalf("the observer saw %d calls", calls.Load())
	}
}

func stackCreate(ctx context.Context, t *testing.T, admin *Admin, spec PromotionSpec) *Promotion {
	t.Helper()
	p, err := admin.Create(ctx, spec)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if p.State != StateActive || p.Remaining != 5 || p.Key != PromotionKey(spec.PromoID, 1) || p.Shard != Shard(p.Key) {
		t.Fatalf("created %+v", p)
	}
	_, err = admin.Create(ctx, spec)
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeAlreadyExists || e.StatusCode != http.StatusConflict || e.Unknown {
		t.Fatalf("second create: %v, want ALREADY_EXISTS", err)
	}
	return p
}

// stackGrants grants one unit under a requestId derived beside the promotion and
// checks the replay, the refusals and both reads; it returns the requestId.
func stackGrants(ctx context.Context, t *testing.T, grab *Client, admin *Admin, run string) string {
	t.Helper()
	req := GrabRequest{RequestID: run + "-order-1", Pin: run + "-buyer", IP: "10.9.0.1", Items: []Item{{PromoID: run, Type: 1, Num: 1}}}.WithRequestIDBeside()
	ans, err := grab.Grab(ctx, req)
	if err != nil || ans.Result != ResultGranted || ans.RequestID != req.RequestID || len(ans.Items) != 1 || ans.Items[0].Remaining == nil || *ans.Items[0].Remaining != 4 {
		t.Fatalf("grab: %+v %v", ans, err)
	}
	req.Resend = true
	if again, err := grab.Grab(ctx, req); err != nil || again.Result != ResultGranted || again.Items[0].Remaining != nil {
		t.Fatalf("replay: %+v %v, want GRANTED without remaining", again, err)
	}
	other := GrabRequest{RequestID: run + "-order-2", Pin: req.Pin, IP: req.IP, Items: req.Items}
	if _, err := grab.Grab(ctx, other); ResultOf(err) != ResultPinLimit {
		t.Fatalf("a second grab by the pin: %v, want PIN_LIMIT", err)
	}
	reused := req
	reused.Pin = run + "-someone-else"
	_, err = grab.Grab(ctx, reused)
	var e *Error
	if !errors.As(err, &e) || e.Result != ResultRequestIDReused || !e.Refused() {
		t.Fatalf("requestId with another body: %v, want REQUEST_ID_REUSED", err)
	}
	deadline := time.Now().Add(3 * time.Second) // the status is cached up to a second
	for {
		st, err := grab.Status(ctx, run, 1)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		if st.State == StateActive && st.Remaining == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %+v, want ACTIVE with 4 remaining", st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if p, err := admin.Get(ctx, run, 1); err != nil || p.Granted != 1 || p.Remaining != 4 {
		t.Fatalf("get: %+v %v", p, err)
	}
	return req.RequestID
}

// stackCancels returns the grant, and checks that a second cancel and a replay of
// the grab say so.
func stackCancels(ctx context.Context, t *testing.T, grab *Client, run, rid string) {
	t.Helper()
	ans, err := grab.Cancel(ctx, rid, run+"-buyer", ReasonUserCancelled)
	if err != nil || ans.Result != ResultReturned || len(ans.Items) != 1 {
		t.Fatalf("cancel: %+v %v", ans, err)
	}
	if ans, err = grab.Cancel(ctx, rid, run+"-buyer", ""); err != nil || ans.Result != ResultAlreadyReturned {
		t.Fatalf("second cancel: %+v %v", ans, err)
	}
	req := GrabRequest{RequestID: rid, Pin: run + "-buyer", IP: "10.9.0.1", Items: []Item{{PromoID: run, Type: 1, Num: 1}}, Resend: true}
	if _, err := grab.Grab(ctx, req); ResultOf(err) != ResultAlreadyReturned {
		t.Fatalf("replay of a cancelled grab: %v, want ALREADY_RETURNED", err)
	}
	if _, err := grab.Cancel(ctx, run+"-never-sent", run+"-buyer", ""); CodeOf(err) != CodeNotFound {
		t.Fatalf("cancel of a grab never sent: %v, want NOT_FOUND", err)
	}
}

// stackHolds grants a hold and confirms it.
func stackHolds(ctx context.Context, t *testing.T, grab *Client, run string) {
	t.Helper()
	req := GrabRequest{RequestID: run + "-held", Pin: run + "-payer", IP: "10.9.0.2", HoldSeconds: 600, Items: []Item{{PromoID: run, Type: 1, Num: 1}}}
	if ans, err := grab.Grab(ctx, req); err != nil || ans.Result != ResultGranted {
		t.Fatalf("held grab: %+v %v", ans, err)
	}
	for i := 0; i < 2; i++ {
		if ans, err := grab.Confirm(ctx, req.RequestID, req.Pin); err != nil || ans.Result != ResultConfirmed {
			t.Fatalf("confirm %d: %+v %v", i+1, ans, err)
		}
	}
	if _, err := grab.Confirm(ctx, req.RequestID, run+"-not-the-payer"); err == nil || !strings.Contains(err.Error(), "NOT_FOUND") {
		t.Fatalf("confirm by another pin: %v, want NOT_FOUND", err)
	}
}
