package lua

import (
	"context"
	"reflect"
	"testing"

	"github.com/flashsale/platform/internal/promo"
)

// promoState is what a return touches on one promotion, for pin p1, ip "ip" and request r1.
type promoState struct {
	Remaining int64 // -1: no hash
	Pin, IP   int64 // -1: no field
	Entry     string
	Pending   bool
}

func stateOf(t *testing.T, k string) promoState {
	s := promoState{Remaining: -1, Pin: held(t, promo.PinsKey(k), "p1"), IP: held(t, promo.IPsKey(k), "ip")}
	if h, found, err := ReadHash(context.Background(), rdb, k); err != nil {
		t.Fatal(err)
	} else if found {
		s.Remaining = h.Remaining
	}
	e, _ := ledger(t, k, "r1")
	s.Entry = e.State
	s.Pending = pendingScore(t, k, "r1") >= 0
	return s
}

func TestReturn(t *testing.T) {
	t.Parallel()
	untouched := promoState{Remaining: 10, Pin: -1, IP: -1}
	returned := promoState{Remaining: 10, Pin: -1, IP: -1, Entry: "R"}
	call := func(only bool, keys ...string) ReturnCall {
		return ReturnCall{RequestID: "r1", Pin: "p1", OnlyPending: only, NowMs: now, Keys: keys}
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, a, b string) ReturnCall
		want  ReturnReply
		after []promoState // a, b
	}{
		{"cancel of a pending take restores counters exactly", func(t *testing.T, a, b string) ReturnCall {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 3)))
			return call(false, a)
		}, ReturnReply{Code: ReturnReturned, Returned: 1}, []promoState{returned, untouched}},
		{"second return is ALREADY_RETURNED and changes nothing", func(t *testing.T, a, b string) ReturnCall {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 3)))
			mustReturn(t, call(false, a), ReturnReturned)
			return call(false, a)
		}, ReturnReply{Code: ReturnAlreadyReturned}, []promoState{returned, untouched}},
		{"rollback of a pending take", func(t *testing.T, a, b string) ReturnCall {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 2)))
			return call(true, a)
		}, ReturnReply{Code: ReturnReturned, Returned: 1}, []promoState{returned, untouched}},
		{"cancel of a committed take", func(t *testing.T, a, b string) ReturnCall {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 2)))
			mustCommit(t, "r1", a)
			return call(false, a)
		}, ReturnReply{Code: ReturnReturned, Returned: 1}, []promoState{returned, untouched}},
		{"rollback refuses a committed take", func(t *testing.T, a, b string) ReturnCall {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 2), item(b, 1)))
			mustCommit(t, "r1", a)
			return call(true, a, b)
		}, ReturnReply{Code: ReturnCommitted}, []promoState{
			{Remaining: 8, Pin: 2, IP: 2, Entry: "G"},
			{Remaining: 9, Pin: 1, IP: 1, Entry: "P", Pending: true},
		}},
		{"rollback refuses returned plus committed", func(t *testing.T, a, b string) ReturnCall {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 2), item(b, 1)))
			mustReturn(t, call(true, b), ReturnReturned)
			mustCommit(t, "r1", a)
			return call(true, a, b)
		}, ReturnReply{Code: ReturnCommitted}, []promoState{{Remaining: 8, Pin: 2, IP: 2, Entry: "G"}, returned}},
		{"another pin is NOT_FOUND", func(t *testing.T, a, b string) ReturnCall {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 2)))
			c := call(false, a)
			c.Pin = "p2"
			return c
		}, ReturnReply{Code: ReturnNotFound}, []promoState{{Remaining: 8, Pin: 2, IP: 2, Entry: "P", Pending: true}, untouched}},
		{"no entry is NOT_FOUND", func(t *testing.T, a, b string) ReturnCall {
			return call(false, a)
		}, ReturnReply{Code: ReturnNotFound}, []promoState{untouched, untouched}},
		{"one entry missing changes nothing", func(t *testing.T, a, b string) ReturnCall {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 2)))
			return call(false, a, b)
		}, ReturnReply{Code: ReturnNotFound}, []promoState{{Remaining: 8, Pin: 2, IP: 2, Entry: "P", Pending: true}, untouched}},
		{"multi item", func(t *testing.T, a, b string) ReturnCall {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 2), item(b, 5)))
			return call(false, a, b)
		}, ReturnReply{Code: ReturnReturned, Returned: 2}, []promoState{returned, returned}},
		{"multi item, one already returned", func(t *testing.T, a, b string) ReturnCall {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 2), item(b, 5)))
			mustReturn(t, call(false, b), ReturnReturned)
			return call(false, a, b)
		}, ReturnReply{Code: ReturnReturned, Returned: 1}, []promoState{returned, returned}},
		{"other holdings of the pin and ip stay", func(t *testing.T, a, b string) ReturnCall {
			mustGrab(t, grabCall("r0", "p1", "ip", item(a, 2)))
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 3)))
			return call(false, a)
		}, ReturnReply{Code: ReturnReturned, Returned: 1}, []promoState{{Remaining: 8, Pin: 2, IP: 2, Entry: "R"}, untouched}},
		{"a short counter is deleted, never negative", func(t *testing.T, a, b string) ReturnCall {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 3)))
			rdb.HSet(context.Background(), promo.PinsKey(a), "p1", 1)
			return call(false, a)
		}, ReturnReply{Code: ReturnReturned, Returned: 1}, []promoState{returned, untouched}},
		{"promotion hash gone: counters released, hash not recreated", func(t *testing.T, a, b string) ReturnCall {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 3)))
			rdb.Del(context.Background(), a)
			return call(false, a)
		}, ReturnReply{Code: ReturnReturned, Returned: 1}, []promoState{{Remaining: -1, Pin: -1, IP: -1, Entry: "R"}, untouched}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := promoKey(t, "a"), promoKey(t, "b")
			mustCreate(t, a, baseSpec())
			mustCreate(t, b, baseSpec())
			c := tc.setup(t, a, b)
			have, err := Return(context.Background(), rdb, c)
			if err != nil || have != tc.want {
				t.Fatalf("have %+v %v, want %+v", have, err, tc.want)
			}
			for i, k := range []string{a, b} {
				if s := stateOf(t, k); !reflect.DeepEqual(s, tc.after[i]) {
					t.Errorf("promotion %d: have %+v, want %+v", i, s, tc.after[i])
				}
			}
		})
	}
}

// A returned unit can be grabbed again, and a replay of the returned request stays refused.
func TestReturnThenGrabAgain(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	s := baseSpec()
	s.Total, s.PerPin = 1, 1
	mustCreate(t, k, s)
	mustGrab(t, grabCall("r1", "p1", "ip", item(k, 1)))
	mustReturn(t, ReturnCall{RequestID: "r1", Pin: "p1", NowMs: now, Keys: []string{k}}, ReturnReturned)
	if r := mustGrab(t, grabCall("r1", "p1", "ip", item(k, 1))); r.Code != CodeDuplicate || r.LedgerState != "R" {
		t.Fatalf("replay after return: %+v", r)
	}
	if r := mustGrab(t, grabCall("r2", "p1", "ip", item(k, 1))); r.Code != CodeOK || r.Remaining[0] != 0 {
		t.Fatalf("grab after return: %+v", r)
	}
}

func TestReturnInvalid(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	bad := map[string]ReturnCall{
		"empty request": {Pin: "p", Keys: []string{k}},
		"no keys":       {RequestID: "r", Pin: "p"},
		"key twice":     {RequestID: "r", Pin: "p", Keys: []string{k, k}},
	}
	for name, c := range bad {
		if _, err := Return(context.Background(), rdb, c); err == nil {
			t.Errorf("%s: no error", name)
		}
		if _, err := ParseReturn(QueueReturn(context.Background(), rdb.Pipeline(), c)); err == nil {
			t.Errorf("%s: queued", name)
		}
	}
}
