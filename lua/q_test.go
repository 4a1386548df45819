package lua

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/flashsale/platform/internal/promo"
)

type grabStep struct {
	call func(k []string) GrabCall
	want GrabReply
	// remaining of each promotion after the step (-1: no hash).
	remaining []int64
}

func item(key string, num int64) GrabItem { return GrabItem{Key: key, Num: num} }

// one is a grab of num units of the first promotion by pin p1 from ip 10.0.0.1.
func one(rid string, num int64) func(k []string) GrabCall {
	return func(k []string) GrabCall { return grabCall(rid, "p1", "10.0.0.1", item(k[0], num)) }
}

func with(f func(k []string) GrabCall, mod func(c *GrabCall)) func(k []string) GrabCall {
	return func(k []string) GrabCall {
		c := f(k)
		mod(&c)
		return c
	}
}

func ok(rem ...int64) GrabReply { return GrabReply{Code: CodeOK, Remaining: rem} }

func TestGrab(t *testing.T) {
	t.Parallel()
	spec := func(mod func(s *AdminSpec)) *AdminSpec {
		s := baseSpec()
		if mod != nil {
			mod(&s)
		}
		return &s
	}
	cases := []struct {
		name  string
		specs []*AdminSpec // nil: no such promotion
		steps []grabStep
	}{
		{"ok takes and reports remaining", []*AdminSpec{spec(nil)}, []grabStep{
			{one("r1", 3), ok(7), []int64{7}},
		}},
		{"last unit then sold out", []*AdminSpec{spec(func(s *AdminSpec) { s.Total = 2 })}, []grabStep{
			{one("r1", 1), ok(1), []int64{1}},
			{one("r2", 1), ok(0), []int64{0}},
			{one("r3", 1), GrabReply{Code: CodeSoldOut}, []int64{0}},
		}},
		{"num above remaining is sold out and takes nothing", []*AdminSpec{spec(func(s *AdminSpec) { s.Total = 3 })}, []grabStep{
			{one("r1", 2), ok(1), []int64{1}},
			{one("r2", 2), GrabReply{Code: CodeSoldOut, Left: 1}, []int64{1}},
			{one("r3", 1), ok(0), []int64{0}},
		}},
		{"not found", []*AdminSpec{nil}, []grabStep{
			{one("r1", 1), GrabReply{Code: CodeNotFound}, []int64{-1}},
		}},
		{"stopped", []*AdminSpec{spec(func(s *AdminSpec) { s.State = "STOPPED" })}, []grabStep{
			{one("r1", 1), GrabReply{Code: CodeStopped}, []int64{10}},
		}},
		{"before start, at start", []*AdminSpec{spec(func(s *AdminSpec) { s.StartMs = now + 1 })}, []grabStep{
			{one("r1", 1), GrabReply{Code: CodeNotStarted, StartMs: now + 1}, []int64{10}},
			{with(one("r2", 1), func(c *GrabCall) { c.NowMs = now + 1 }), ok(9), []int64{9}},
		}},
		{"just before end, at end", []*AdminSpec{spec(func(s *AdminSpec) { s.EndMs = now + 1 })}, []grabStep{
			{one("r1", 1), ok(9), []int64{9}},
			{with(one("r2", 1), func(c *GrabCall) { c.NowMs = now + 1 }), GrabReply{Code: CodeEnded}, []int64{9}},
		}},
		{"too many per grab", []*AdminSpec{spec(func(s *AdminSpec) { s.MaxPerGrab = 2 })}, []grabStep{
			{one("r1", 3), GrabReply{Code: CodeTooMany}, []int64{10}},
			{one("r2", 2), ok(8), []int64{8}},
		}},
		{"rate limited, retry after, window restarts", []*AdminSpec{spec(func(s *AdminSpec) {
			s.RateLimit, s.RateWindowMs, s.PerPin = 2, 1000, 1
		})}, []grabStep{
			{one("r1", 1), ok(9), []int64{9}},
			// A refused attempt still counts in the window.
			{with(one("r2", 1), func(c *GrabCall) { c.NowMs = now + 100 }), GrabReply{Code: CodePinLimit}, []int64{9}},
			{with(one("r3", 1), func(c *GrabCall) { c.NowMs = now + 400; c.Pin = "p2" }),
				GrabReply{Code: CodeRateLimited, RetryAfterMs: 600}, []int64{9}},
			{with(one("r4", 1), func(c *GrabCall) { c.NowMs = now + 999; c.Pin = "p2" }),
				GrabReply{Code: CodeRateLimited, RetryAfterMs: 1}, []int64{9}},
			{with(one("r5", 1), func(c *GrabCall) { c.NowMs = now + 1000; c.Pin = "p2" }), ok(8), []int64{8}},
		}},
		{"rate factor halves the limit", []*AdminSpec{spec(func(s *AdminSpec) { s.RateLimit, s.RateWindowMs = 4, 1000 })}, []grabStep{
			{with(one("r1", 1), func(c *GrabCall) { c.RateFactorPermille = 500 }), ok(9), []int64{9}},
			{with(one("r2", 1), func(c *GrabCall) { c.RateFactorPermille = 500 }), ok(8), []int64{8}},
			{with(one("r3", 1), func(c *GrabCall) { c.RateFactorPermille = 500 }),
				GrabReply{Code: CodeRateLimited, RetryAfterMs: 1000}, []int64{8}},
			{one("r4", 1), ok(7), []int64{7}}, // back to normal: 4 per window
		}},
		{"rate factor zero floors to one", []*AdminSpec{spec(func(s *AdminSpec) { s.RateLimit, s.RateWindowMs = 100, 1000 })}, []grabStep{
			{with(one("r1", 1), func(c *GrabCall) { c.RateFactorPermille = 0 }), ok(9), []int64{9}},
			{with(one("r2", 1), func(c *GrabCall) { c.RateFactorPermille = 0 }),
				GrabReply{Code: CodeRateLimited, RetryAfterMs: 1000}, []int64{9}},
		}},
		{"sold out is answered before the rate window", []*AdminSpec{spec(func(s *AdminSpec) {
			s.Total, s.RateLimit, s.RateWindowMs = 1, 1, 1000
		})}, []grabStep{
			{one("r1", 1), ok(0), []int64{0}},
			{one("r2", 1), GrabReply{Code: CodeSoldOut}, []int64{0}},
		}},
		{"pin limit", []*AdminSpec{spec(func(s *AdminSpec) { s.PerPin = 3 })}, []grabStep{
			{one("r1", 2), ok(8), []int64{8}},
			{one("r2", 2), GrabReply{Code: CodePinLimit}, []int64{8}},
			{one("r3", 1), ok(7), []int64{7}},
			{one("r4", 1), GrabReply{Code: CodePinLimit}, []int64{7}},
			{with(one("r5", 1), func(c *GrabCall) { c.Pin = "p2" }), ok(6), []int64{6}},
		}},
		{"ip limit", []*AdminSpec{spec(func(s *AdminSpec) { s.PerIP = 2 })}, []grabStep{
			{one("r1", 1), ok(9), []int64{9}},
			{with(one("r2", 1), func(c *GrabCall) { c.Pin = "p2" }), ok(8), []int64{8}},
			{with(one("r3", 1), func(c *GrabCall) { c.Pin = "p3" }), GrabReply{Code: CodeIPLimit}, []int64{8}},
			{with(one("r4", 1), func(c *GrabCall) { c.Pin = "p3"; c.IP = "10.0.0.2" }), ok(7), []int64{7}},
		}},
		{"ip limit counts an IPv6 /64 as one ip", []*AdminSpec{spec(func(s *AdminSpec) { s.PerIP = 2 })}, []grabStep{
			{with(one("r1", 1), func(c *GrabCall) { c.IP = "2001:db8:1:2::1" }), ok(9), []int64{9}},
			{with(one("r2", 1), func(c *GrabCall) { c.Pin = "p2"; c.IP = "2001:db8:1:2::2" }), ok(8), []int64{8}},
			{with(one("r3", 1), func(c *GrabCall) { c.Pin = "p3"; c.IP = "2001:db8:1:2:ffff::3" }), GrabReply{Code: CodeIPLimit}, []int64{8}},
			{with(one("r4", 1), func(c *GrabCall) { c.Pin = "p3"; c.IP = "2001:db8:1:3::1" }), ok(7), []int64{7}},
		}},
		{"duplicate answers the ledger state and takes nothing", []*AdminSpec{spec(func(s *AdminSpec) { s.Total = 1 })}, []grabStep{
			{one("r1", 1), ok(0), []int64{0}},
			// Sold out now, but the ledger comes first: DUPLICATE, not SOLD_OUT.
			{one("r1", 1), GrabReply{Code: CodeDuplicate, LedgerState: "P"}, []int64{0}},
			{with(one("r1", 1), func(c *GrabCall) { c.BodyHash = "other" }), GrabReply{Code: CodeRequestIDReused}, []int64{0}},
			// The ledger is global to the requestId: another pin replaying it is refused too.
			{with(one("r1", 1), func(c *GrabCall) { c.Pin = "p9" }), GrabReply{Code: CodeDuplicate, LedgerState: "P"}, []int64{0}},
		}},
		{"ledger is checked before time and state", []*AdminSpec{spec(nil)}, []grabStep{
			{one("r1", 1), ok(9), []int64{9}},
			{with(one("r1", 1), func(c *GrabCall) { c.NowMs = now + 7_200_000 }),
				GrabReply{Code: CodeDuplicate, LedgerState: "P"}, []int64{9}},
		}},
		{"multi item ok", []*AdminSpec{spec(nil), spec(func(s *AdminSpec) { s.Total = 5 })}, []grabStep{
			{func(k []string) GrabCall { return grabCall("r1", "p1", "ip", item(k[0], 2), item(k[1], 5)) },
				ok(8, 0), []int64{8, 0}},
		}},
		{"multi item: second fails, first untouched", []*AdminSpec{spec(nil), spec(func(s *AdminSpec) { s.Total = 1 })}, []grabStep{
			{func(k []string) GrabCall { return grabCall("r1", "p1", "ip", item(k[0], 2), item(k[1], 2)) },
				GrabReply{Code: CodeSoldOut, Index: 1, Left: 1}, []int64{10, 1}},
			{func(k []string) GrabCall { return grabCall("r1", "p1", "ip", item(k[0], 2), item(k[1], 1)) },
				ok(8, 0), []int64{8, 0}},
		}},
		{"multi item: second missing", []*AdminSpec{spec(nil), nil}, []grabStep{
			{func(k []string) GrabCall { return grabCall("r1", "p1", "ip", item(k[0], 1), item(k[1], 1)) },
				GrabReply{Code: CodeNotFound, Index: 1}, []int64{10, -1}},
		}},
		{"multi item: duplicate found on second item's ledger", []*AdminSpec{spec(nil), spec(nil)}, []grabStep{
			{func(k []string) GrabCall { return grabCall("r1", "p1", "ip", item(k[1], 1)) }, ok(9), []int64{10, 9}},
			{func(k []string) GrabCall { return grabCall("r1", "p1", "ip", item(k[0], 1), item(k[1], 1)) },
				GrabReply{Code: CodeDuplicate, Index: 1, LedgerState: "P"}, []int64{10, 9}},
			{func(k []string) GrabCall {
				c := grabCall("r1", "p1", "ip", item(k[0], 1), item(k[1], 1))
				c.BodyHash = "other"
				return c
			}, GrabReply{Code: CodeRequestIDReused, Index: 1}, []int64{10, 9}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			keys := make([]string, len(tc.specs))
			for i, s := range tc.specs {
				keys[i] = promoKey(t, fmt.Sprint(i))
				if s != nil {
					mustCreate(t, keys[i], *s)
				}
			}
			for si, st := range tc.steps {
				have := mustGrab(t, st.call(keys))
				have.Changes = nil // TestStateChanges tells which grabs announce
				if !reflect.DeepEqual(have, st.want) {
					t.Fatalf("step %d: have %+v, want %+v", si, have, st.want)
				}
				for i, k := range keys {
					h, found, err := ReadHash(context.Background(), rdb, k)
					if err != nil {
						t.Fatal(err)
					}
					rem := int64(-1)
					if found {
						rem = h.Remaining
					}
					if rem != st.remaining[i] {
						t.Fatalf("step %d: promotion %d remaining %d, want %d", si, i, rem, st.remaining[i])
					}
				}
			}
		})
	}
}

// A refused multi-item grab leaves no trace of the items that passed (rate window aside).
func TestGrabAllOrNothingLeavesNoTrace(t *testing.T) {
	t.Parallel()
	a, b := promoKey(t, "a"), promoKey(t, "b")
	sa := baseSpec()
	sa.RateLimit, sa.RateWindowMs = 10, 1000
	mustCreate(t, a, sa)
	sb := baseSpec()
	sb.PerPin = 1
	mustCreate(t, b, sb)

	have := mustGrab(t, grabCall("r1", "p1", "ip1", item(a, 1), item(b, 2)))
	if have.Code != CodePinLimit || have.Index != 1 {
		t.Fatalf("have %+v, want PIN_LIMIT at 1", have)
	}
	for _, k := range []string{a, b} {
		if h := mustHash(t, k); h.Remaining != 10 {
			t.Errorf("%s remaining %d", k, h.Remaining)
		}
		for _, ck := range []string{promo.PinsKey(k), promo.IPsKey(k), promo.LedgerKey(k), promo.PendingKey(k)} {
			if n := rdb.Exists(context.Background(), ck).Val(); n != 0 {
				t.Errorf("%s exists after a refused grab", ck)
			}
		}
	}
	// The window of the item that passed counted the attempt.
	if h := mustHash(t, a); h.WinCount != 1 || h.WinStart != now {
		t.Errorf("window of a: count %d start %d", h.WinCount, h.WinStart)
	}
}

// An accepted grab writes exactly: remaining, pins, ips, a P ledger entry, the pending deadline.
func TestGrabWrites(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	mustCreate(t, k, baseSpec())
	c := grabCall("r1", "pin/1", "10.0.0.1", item(k, 3))
	c.DeadlineMs = now + 3000
	if have := mustGrab(t, c); have.Code != CodeOK {
		t.Fatalf("have %+v", have)
	}
	if v := held(t, promo.PinsKey(k), "pin/1"); v != 3 {
		t.Errorf("pin holds %d", v)
	}
	if v := held(t, promo.IPsKey(k), "10.0.0.1"); v != 3 {
		t.Errorf("ip holds %d", v)
	}
	e, found := ledger(t, k, "r1")
	want := LedgerEntry{State: "P", BodyHash: "h-r1", Num: 3, Pin: "pin/1", IP: "10.0.0.1", DeadlineMs: now + 3000}
	if !found || e != want {
		t.Errorf("ledger %+v, want %+v", e, want)
	}
	if s := pendingScore(t, k, "r1"); s != now+3000 {
		t.Errorf("pending score %d", s)
	}
}

func TestGrabInvalidCalls(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	mustCreate(t, k, baseSpec())
	bad := map[string]GrabCall{
		"no items":        grabCall("r1", "p", "ip"),
		"zero num":        grabCall("r1", "p", "ip", item(k, 0)),
		"key twice":       grabCall("r1", "p", "ip", item(k, 1), item(k, 1)),
		"empty key":       grabCall("r1", "p", "ip", item("", 1)),
		"empty request":   grabCall("", "p", "ip", item(k, 1)),
		"negative factor": func() GrabCall { c := grabCall("r1", "p", "ip", item(k, 1)); c.RateFactorPermille = -1; return c }(),
	}
	for name, c := range bad {
		if _, err := Grab(context.Background(), rdb, c); err == nil {
			t.Errorf("%s: no error", name)
		}
		p := rdb.Pipeline()
		cmd := QueueGrab(context.Background(), p, c)
		if _, err := ParseGrab(cmd); err == nil {
			t.Errorf("%s: queued without error", name)
		}
	}
	// The script refuses a malformed call on its own too, before any write.
	ks := promo.Keys(k)
	keys := append(ks[:], ks[:]...)
	err := qScript.Run(context.Background(), rdb, keys, now, "r1", "h", "p", "ip", now, 1000, "ip", 0, 1, 1).Err()
	if err == nil {
		t.Error("script accepted a promotion listed twice")
	}
	err = qScript.Run(context.Background(), rdb, ks[:], now, "r1", "h", "p", "ip", now, 1000, "ip", 0, -1).Err()
	if err == nil {
		t.Error("script accepted num -1")
	}
	if h := mustHash(t, k); h.Remaining != 10 {
		t.Errorf("remaining %d after refused calls", h.Remaining)
	}
}

// 200 buyers race for 50 units: exactly 50 are granted, remaining ends at 0, never below.
func TestGrabConcurrentNoOversell(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	s := baseSpec()
	s.Total = 50
	mustCreate(t, k, s)
	var granted, soldOut atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := Grab(context.Background(), rdb, grabCall(fmt.Sprint("r", i), fmt.Sprint("p", i), fmt.Sprint("ip", i), item(k, 1)))
			switch {
			case err != nil:
				t.Error(err)
			case r.Code == CodeOK:
				granted.Add(1)
				if r.Remaining[0] < 0 {
					t.Errorf("remaining %d", r.Remaining[0])
				}
			case r.Code == CodeSoldOut:
				soldOut.Add(1)
			default:
				t.Errorf("unexpected %+v", r)
			}
		}()
	}
	wg.Wait()
	if granted.Load() != 50 || soldOut.Load() != 150 {
		t.Fatalf("granted %d sold out %d, want 50 and 150", granted.Load(), soldOut.Load())
	}
	if h := mustHash(t, k); h.Remaining != 0 {
		t.Fatalf("remaining %d", h.Remaining)
	}
	if n := rdb.HLen(context.Background(), promo.LedgerKey(k)).Val(); n != 50 {
		t.Fatalf("ledger holds %d entries", n)
	}
}

// Concurrent grabs of one pin (and of one ip) never exceed the limit.
func TestGrabConcurrentPinAndIPLimits(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	s := baseSpec()
	s.Total, s.PerPin, s.PerIP = 1000, 3, 5
	mustCreate(t, k, s)
	race := func(prefix string, call func(i int) GrabCall, limitCode Code) int64 {
		var granted atomic.Int64
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := Grab(context.Background(), rdb, call(i))
				switch {
				case err != nil:
					t.Error(err)
				case r.Code == CodeOK:
					granted.Add(1)
				case r.Code != limitCode:
					t.Errorf("%s: unexpected %+v", prefix, r)
				}
			}()
		}
		wg.Wait()
		return granted.Load()
	}
	// One pin, distinct ips: 3 units.
	if n := race("pin", func(i int) GrabCall {
		return grabCall(fmt.Sprint("pin-r", i), "same-pin", fmt.Sprint("ip", i), item(k, 1))
	}, CodePinLimit); n != 3 {
		t.Fatalf("one pin granted %d, want 3", n)
	}
	// One ip, distinct pins: 5 units.
	if n := race("ip", func(i int) GrabCall {
		return grabCall(fmt.Sprint("ip-r", i), fmt.Sprint("pin", i), "same-ip", item(k, 1))
	}, CodeIPLimit); n != 5 {
		t.Fatalf("one ip granted %d, want 5", n)
	}
	if v := held(t, promo.PinsKey(k), "same-pin"); v != 3 {
		t.Errorf("pin holds %d", v)
	}
	if v := held(t, promo.IPsKey(k), "same-ip"); v != 5 {
		t.Errorf("ip holds %d", v)
	}
	if h := mustHash(t, k); h.Remaining != 1000-8 {
		t.Errorf("remaining %d", h.Remaining)
	}
}

// Every code of every script has its name, and the first value past the last name
// prints as a number: a code added without a name (or a name here) fails.
func TestCodeStrings(t *testing.T) {
	t.Parallel()
	check := func(kind string, names []string, str func(int) string) {
		t.Helper()
		for i, w := range names {
			if have := str(i); have != w {
				t.Errorf("%s(%d) = %s, want %s", kind, i, have, w)
			}
		}
		if have, want := str(len(names)), fmt.Sprintf("%s(%d)", kind, len(names)); have != want {
			t.Errorf("%s(%d) = %s, want %s: a code without its name in this test", kind, len(names), have, want)
		}
	}
	check("Code", []string{"OK", "DUPLICATE", "REQUEST_ID_REUSED", "NOT_FOUND", "STOPPED", "NOT_STARTED",
		"ENDED", "SOLD_OUT", "RATE_LIMITED", "PIN_LIMIT", "IP_LIMIT", "TOO_MANY", "IP_PART_NEEDED", "BUCKETED", "CLAIMED", "CHANNEL_NOT_ALLOWED"}, func(i int) string { return Code(i).String() })
	check("AdminCode", []string{"OK", "ALREADY_APPLIED", "EXISTS", "NOT_FOUND", "STALE", "STOPPED", "BELOW_GRANTED", "FENCED"},
		func(i int) string { return AdminCode(i).String() })
	check("CommitCode", []string{"COMMITTED", "NOT_FOUND", "RETURNED"}, func(i int) string { return CommitCode(i).String() })
	check("ReturnCode", []string{"RETURNED", "ALREADY_RETURNED", "NOT_FOUND", "COMMITTED", "PENDING"},
		func(i int) string { return ReturnCode(i).String() })
	if CodeBucketed != 13 || AdminFenced != 7 {
		t.Errorf("the last codes moved: BUCKETED %d, FENCED %d", CodeBucketed, AdminFenced)
	}
}
