package lua

import (
	"context"
	"reflect"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// The promotions of a return test: created with baseSpec (total 10); request r1 of
// pin p1 and ip "ip" takes nums[0] units of a and nums[1] units of b.
var nums = [2]int64{2, 3}

const (
	deadline     = now + 5000 // grabCall's DeadlineMs: the pending score of a P entry
	cancelReason = "BUYER"    // the reason of every cancel unless a case says otherwise
)

// promoState is what a return touches on one promotion, for pin p1, ip "ip" and request r1.
type promoState struct {
	Remaining int64 // -1: no hash
	Pin, IP   int64 // -1: no field
	Entry     string
	Reason    string
	Score     int64 // score of r1 in pending, -1: not in the set
}

func stateOf(t *testing.T, k string) promoState {
	s := promoState{Remaining: -1, Pin: held(t, promo.PinsKey(k), "p1"), IP: held(t, promo.IPsKey(k), "ip")}
	if h, found, err := ReadHash(context.Background(), rdb, k); err != nil {
		t.Fatal(err)
	} else if found {
		s.Remaining = h.Remaining
	}
	e, _ := ledger(t, k, "r1")
	s.Entry, s.Reason = e.State, e.Reason
	s.Score = pendingScore(t, k, "r1")
	return s
}

// expect is the state of a promotion whose r1 entry is st ("" = no entry) after r1
// took n units: the stock is held while the entry is P or G, given back in every
// other state; A and C are due in pending at once, P at its deadline.
func expect(st string, n int64) promoState {
	s := promoState{Remaining: 10, Pin: -1, IP: -1, Entry: st, Score: -1}
	switch st {
	case LedgerPending:
		s.Remaining, s.Pin, s.IP, s.Score = 10-n, n, n, deadline
	case LedgerCommitted:
		s.Remaining, s.Pin, s.IP = 10-n, n, n
	case LedgerAborted:
		s.Score = 0
	case LedgerCancelled:
		s.Reason, s.Score = cancelReason, 0
	case LedgerReturned:
		s.Reason = cancelReason
	}
	return s
}

func retCall(mode ReturnMode, keys ...string) ReturnCall {
	c := ReturnCall{RequestID: "r1", Pin: "p1", Mode: mode, NowMs: now, Keys: keys}
	if mode == ReturnCancel {
		c.Reason = cancelReason
	}
	return c
}

// putStates brings r1's entry on keys[i] to states[i] ("" = no entry) through the
// scripts themselves: one grab of every item that has an entry, then per item
// commit, abort, cancel and finalize as the state needs.
func putStates(t *testing.T, keys [2]string, states [2]string) {
	var items []GrabItem
	for i, st := range states {
		if st != "" {
			items = append(items, item(keys[i], nums[i]))
		}
	}
	if len(items) == 0 {
		return
	}
	if r := mustGrab(t, grabCall("r1", "p1", "ip", items...)); r.Code != CodeOK {
		t.Fatalf("setup grab: %+v", r)
	}
	for i, st := range states {
		k := keys[i]
		switch st {
		case LedgerCommitted:
			mustCommit(t, "r1", k)
		case LedgerAborted:
			mustReturn(t, retCall(ReturnAbort, k), ReturnReturned)
		case LedgerAbortRecorded:
			mustReturn(t, retCall(ReturnAbort, k), ReturnReturned)
			mustReturn(t, retCall(ReturnFinalize, k), ReturnReturned)
		case LedgerCancelled:
			mustCommit(t, "r1", k)
			mustReturn(t, retCall(ReturnCancel, k), ReturnReturned)
		case LedgerReturned:
			mustCommit(t, "r1", k)
			mustReturn(t, retCall(ReturnCancel, k), ReturnReturned)
			mustReturn(t, retCall(ReturnFinalize, k), ReturnReturned)
		}
	}
}

// TestReturn: every mode against every entry state, single and multi item. Each
// call is made twice: a second call changes nothing (ALREADY_RETURNED after a
// RETURNED, the same refusal otherwise).
func TestReturn(t *testing.T) {
	t.Parallel()
	const (
		P, G, A, X, C, R = LedgerPending, LedgerCommitted, LedgerAborted, LedgerAbortRecorded, LedgerCancelled, LedgerReturned
		none             = ""
	)
	done := func(n int) ReturnReply { return ReturnReply{Code: ReturnReturned, Returned: n} }
	already := ReturnReply{Code: ReturnAlreadyReturned}
	notFound := ReturnReply{Code: ReturnNotFound}
	committed := ReturnReply{Code: ReturnCommitted}
	pending := ReturnReply{Code: ReturnPending}

	cases := []struct {
		name string
		mode ReturnMode
		from [2]string // r1's entry on a and b before the call ("" = none)
		both bool      // the call names a and b (else only a)
		want ReturnReply
		to   [2]string // r1's entry on a and b after the call
		// edit changes the call; setup runs after putStates; after replaces the
		// expected states derived from to.
		edit  func(c *ReturnCall)
		setup func(t *testing.T, a, b string)
		after func(to [2]promoState) [2]promoState
	}{
		// undo: P entries give their stock back and leave the ledger and pending.
		{name: "undo P", mode: ReturnUndo, from: [2]string{P}, want: done(1), to: [2]string{none}},
		{name: "undo G", mode: ReturnUndo, from: [2]string{G}, want: committed, to: [2]string{G}},
		{name: "undo A", mode: ReturnUndo, from: [2]string{A}, want: already, to: [2]string{A}},
		{name: "undo X", mode: ReturnUndo, from: [2]string{X}, want: already, to: [2]string{X}},
		{name: "undo C", mode: ReturnUndo, from: [2]string{C}, want: already, to: [2]string{C}},
		{name: "undo R", mode: ReturnUndo, from: [2]string{R}, want: already, to: [2]string{R}},
		{name: "undo missing is skipped", mode: ReturnUndo, from: [2]string{none}, want: already, to: [2]string{none}},
		{name: "undo ignores the pin", mode: ReturnUndo, from: [2]string{P}, want: done(1), to: [2]string{none},
			edit: func(c *ReturnCall) { c.Pin = "" }},
		// abort: P -> A, stock back, due in pending at once.
		{name: "abort P", mode: ReturnAbort, from: [2]string{P}, want: done(1), to: [2]string{A}},
		{name: "abort G", mode: ReturnAbort, from: [2]string{G}, want: committed, to: [2]string{G}},
		{name: "abort A", mode: ReturnAbort, from: [2]string{A}, want: already, to: [2]string{A}},
		{name: "abort X", mode: ReturnAbort, from: [2]string{X}, want: already, to: [2]string{X}},
		{name: "abort C", mode: ReturnAbort, from: [2]string{C}, want: already, to: [2]string{C}},
		{name: "abort R", mode: ReturnAbort, from: [2]string{R}, want: already, to: [2]string{R}},
		{name: "abort missing", mode: ReturnAbort, from: [2]string{none}, want: notFound, to: [2]string{none}},
		{name: "abort ignores the pin", mode: ReturnAbort, from: [2]string{P}, want: done(1), to: [2]string{A},
			edit: func(c *ReturnCall) { c.Pin = "p2" }},
		{name: "abort stores a reason when given", mode: ReturnAbort, from: [2]string{P}, want: done(1), to: [2]string{A},
			edit:  func(c *ReturnCall) { c.Reason = "ROLLBACK" },
			after: func(s [2]promoState) [2]promoState { s[0].Reason = "ROLLBACK"; return s }},
		// cancel: G -> C, stock back, reason stored, due in pending at once.
		{name: "cancel P", mode: ReturnCancel, from: [2]string{P}, want: pending, to: [2]string{P}},
		{name: "cancel G", mode: ReturnCancel, from: [2]string{G}, want: done(1), to: [2]string{C}},
		{name: "cancel A", mode: ReturnCancel, from: [2]string{A}, want: notFound, to: [2]string{A}},
		{name: "cancel X", mode: ReturnCancel, from: [2]string{X}, want: notFound, to: [2]string{X}},
		{name: "cancel C", mode: ReturnCancel, from: [2]string{C}, want: already, to: [2]string{C}},
		{name: "cancel R", mode: ReturnCancel, from: [2]string{R}, want: already, to: [2]string{R}},
		{name: "cancel missing", mode: ReturnCancel, from: [2]string{none}, want: notFound, to: [2]string{none}},
		{name: "cancel by another pin", mode: ReturnCancel, from: [2]string{G}, want: notFound, to: [2]string{G},
			edit: func(c *ReturnCall) { c.Pin = "p2" }},
		{name: "cancel without pin", mode: ReturnCancel, from: [2]string{G}, want: notFound, to: [2]string{G},
			edit: func(c *ReturnCall) { c.Pin = "" }},
		{name: "cancel of a returned take by another pin", mode: ReturnCancel, from: [2]string{C}, want: notFound, to: [2]string{C},
			edit: func(c *ReturnCall) { c.Pin = "p2" }},
		{name: "cancel stores its reason", mode: ReturnCancel, from: [2]string{G}, want: done(1), to: [2]string{C},
			edit:  func(c *ReturnCall) { c.Reason = "OUT_OF_STOCK_UPSTREAM" },
			after: func(s [2]promoState) [2]promoState { s[0].Reason = "OUT_OF_STOCK_UPSTREAM"; return s }},
		// finalize: A -> X, C -> R, out of pending; the stock stays as it is.
		{name: "finalize P", mode: ReturnFinalize, from: [2]string{P}, want: already, to: [2]string{P}},
		{name: "finalize G", mode: ReturnFinalize, from: [2]string{G}, want: already, to: [2]string{G}},
		{name: "finalize A", mode: ReturnFinalize, from: [2]string{A}, want: done(1), to: [2]string{X}},
		{name: "finalize X", mode: ReturnFinalize, from: [2]string{X}, want: already, to: [2]string{X}},
		{name: "finalize C", mode: ReturnFinalize, from: [2]string{C}, want: done(1), to: [2]string{R}},
		{name: "finalize R", mode: ReturnFinalize, from: [2]string{R}, want: already, to: [2]string{R}},
		{name: "finalize missing", mode: ReturnFinalize, from: [2]string{none}, want: notFound, to: [2]string{none}},
		{name: "finalize ignores the pin", mode: ReturnFinalize, from: [2]string{C}, want: done(1), to: [2]string{R},
			edit: func(c *ReturnCall) { c.Pin = "" }},

		// Multi item: a refusal anywhere changes nothing anywhere.
		{name: "undo P P", mode: ReturnUndo, from: [2]string{P, P}, both: true, want: done(2), to: [2]string{none, none}},
		{name: "undo P, missing", mode: ReturnUndo, from: [2]string{P, none}, both: true, want: done(1), to: [2]string{none, none}},
		{name: "undo P A", mode: ReturnUndo, from: [2]string{P, A}, both: true, want: done(1), to: [2]string{none, A}},
		{name: "undo P G", mode: ReturnUndo, from: [2]string{P, G}, both: true, want: committed, to: [2]string{P, G}},
		{name: "undo missing, missing", mode: ReturnUndo, from: [2]string{none, none}, both: true, want: already, to: [2]string{none, none}},
		{name: "abort P P", mode: ReturnAbort, from: [2]string{P, P}, both: true, want: done(2), to: [2]string{A, A}},
		{name: "abort P A", mode: ReturnAbort, from: [2]string{P, A}, both: true, want: done(1), to: [2]string{A, A}},
		{name: "abort P X", mode: ReturnAbort, from: [2]string{P, X}, both: true, want: done(1), to: [2]string{A, X}},
		{name: "abort P G", mode: ReturnAbort, from: [2]string{P, G}, both: true, want: committed, to: [2]string{P, G}},
		{name: "abort P, missing", mode: ReturnAbort, from: [2]string{P, none}, both: true, want: notFound, to: [2]string{P, none}},
		{name: "abort C R", mode: ReturnAbort, from: [2]string{C, R}, both: true, want: already, to: [2]string{C, R}},
		{name: "cancel G G", mode: ReturnCancel, from: [2]string{G, G}, both: true, want: done(2), to: [2]string{C, C}},
		{name: "cancel G C", mode: ReturnCancel, from: [2]string{G, C}, both: true, want: done(1), to: [2]string{C, C}},
		{name: "cancel G R", mode: ReturnCancel, from: [2]string{G, R}, both: true, want: done(1), to: [2]string{C, R}},
		{name: "cancel G P", mode: ReturnCancel, from: [2]string{G, P}, both: true, want: pending, to: [2]string{G, P}},
		{name: "cancel G A", mode: ReturnCancel, from: [2]string{G, A}, both: true, want: notFound, to: [2]string{G, A}},
		{name: "cancel P A: NOT_FOUND before PENDING", mode: ReturnCancel, from: [2]string{P, A}, both: true, want: notFound, to: [2]string{P, A}},
		{name: "cancel G, missing", mode: ReturnCancel, from: [2]string{G, none}, both: true, want: notFound, to: [2]string{G, none}},
		{name: "finalize A C", mode: ReturnFinalize, from: [2]string{A, C}, both: true, want: done(2), to: [2]string{X, R}},
		{name: "finalize A P", mode: ReturnFinalize, from: [2]string{A, P}, both: true, want: done(1), to: [2]string{X, P}},
		{name: "finalize G C", mode: ReturnFinalize, from: [2]string{G, C}, both: true, want: done(1), to: [2]string{G, R}},
		{name: "finalize X R", mode: ReturnFinalize, from: [2]string{X, R}, both: true, want: already, to: [2]string{X, R}},
		{name: "finalize A, missing", mode: ReturnFinalize, from: [2]string{A, none}, both: true, want: notFound, to: [2]string{A, none}},

		// Counters.
		{name: "other holdings of the pin and ip stay", mode: ReturnAbort, from: [2]string{P}, want: done(1), to: [2]string{A},
			setup: func(t *testing.T, a, b string) { mustGrab(t, grabCall("r0", "p1", "ip", item(a, 4))) },
			after: func(s [2]promoState) [2]promoState {
				s[0].Remaining, s[0].Pin, s[0].IP = 6, 4, 4
				return s
			}},
		{name: "a short counter is deleted, never negative", mode: ReturnCancel, from: [2]string{G}, want: done(1), to: [2]string{C},
			setup: func(t *testing.T, a, b string) {
				rdb.HSet(context.Background(), promo.PinsKey(a), "p1", 1)
				rdb.HDel(context.Background(), promo.IPsKey(a), "ip")
			}},
		{name: "promotion hash gone: counters released, hash not recreated", mode: ReturnUndo, from: [2]string{P}, want: done(1), to: [2]string{none},
			setup: func(t *testing.T, a, b string) { rdb.Del(context.Background(), a) },
			after: func(s [2]promoState) [2]promoState { s[0].Remaining = -1; return s }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			a, b := promoKey(t, "a"), promoKey(t, "b")
			mustCreate(t, a, baseSpec())
			mustCreate(t, b, baseSpec())
			putStates(t, [2]string{a, b}, tc.from)
			for i, k := range []string{a, b} { // the setup itself is checked
				if s := stateOf(t, k); s != expect(tc.from[i], nums[i]) {
					t.Fatalf("setup of promotion %d: have %+v, want %+v", i, s, expect(tc.from[i], nums[i]))
				}
			}
			if tc.setup != nil {
				tc.setup(t, a, b)
			}
			c := retCall(tc.mode, a)
			if tc.both {
				c.Keys = []string{a, b}
			}
			if tc.edit != nil {
				tc.edit(&c)
			}
			want := [2]promoState{expect(tc.to[0], nums[0]), expect(tc.to[1], nums[1])}
			if tc.after != nil {
				want = tc.after(want)
			}
			again := tc.want
			if again.Code == ReturnReturned {
				again = ReturnReply{Code: ReturnAlreadyReturned}
			}
			for call, wantReply := range []ReturnReply{tc.want, again} {
				have, err := Return(ctx, rdb, c)
				have.Changes = nil // TestStateChanges tells which returns announce a restock
				if err != nil || !reflect.DeepEqual(have, wantReply) {
					t.Fatalf("call %d: have %+v %v, want %+v", call+1, have, err, wantReply)
				}
				for i, k := range []string{a, b} {
					if s := stateOf(t, k); s != want[i] {
						t.Errorf("call %d, promotion %d: have %+v, want %+v", call+1, i, s, want[i])
					}
					// Whatever the state, the entry keeps what the grab wrote.
					if e, found := ledger(t, k, "r1"); found {
						e.State, e.Reason = "", ""
						if w := (LedgerEntry{BodyHash: "h-r1", Num: nums[i], Pin: "p1", IP: "ip", DeadlineMs: deadline}); e != w {
							t.Errorf("call %d, promotion %d: entry %+v, want %+v", call+1, i, e, w)
						}
					}
				}
			}
		})
	}
}

// After an undo the ledger has forgotten the request: the same requestId grabs afresh.
func TestReturnUndoThenGrabAgain(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	s := baseSpec()
	s.Total, s.PerPin = 1, 1
	mustCreate(t, k, s)
	mustGrab(t, grabCall("r1", "p1", "ip", item(k, 1)))
	mustReturn(t, retCall(ReturnUndo, k), ReturnReturned)
	if _, found := ledger(t, k, "r1"); found {
		t.Fatal("undo left a ledger entry")
	}
	if r := mustGrab(t, grabCall("r1", "p1", "ip", item(k, 1))); r.Code != CodeOK || r.Remaining[0] != 0 {
		t.Fatalf("grab after undo: %+v", r)
	}
	if e, _ := ledger(t, k, "r1"); e.State != LedgerPending || pendingScore(t, k, "r1") != deadline {
		t.Fatalf("entry after the fresh grab: %+v, score %d", e, pendingScore(t, k, "r1"))
	}
}

// An IPv6 take counts the address's /64 (q.lua's ipKey), keeps the address
// itself in the ledger, and a return releases the /64's count.
func TestReturnReleasesTheIPKeyTheTakeCounted(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	s := baseSpec()
	s.PerIP = 1
	mustCreate(t, k, s)
	mustGrab(t, grabCall("r1", "p1", "2001:db8:7:8::1", item(k, 1)))
	if e, _ := ledger(t, k, "r1"); e.IP != "2001:db8:7:8::1" || e.IPKey != "2001:db8:7:8::/64" {
		t.Fatalf("ledger entry %+v: want the address and its /64", e)
	}
	if n := held(t, promo.IPsKey(k), "2001:db8:7:8::/64"); n != 1 {
		t.Fatalf("the /64 holds %d, want 1", n)
	}
	if r := mustGrab(t, grabCall("r2", "p2", "2001:db8:7:8::2", item(k, 1))); r.Code != CodeIPLimit {
		t.Fatalf("a second address of the /64: %v, want IP_LIMIT", r.Code)
	}
	mustReturn(t, ReturnCall{RequestID: "r1", Pin: "p1", Mode: ReturnUndo, NowMs: now, Keys: []string{k}}, ReturnReturned)
	if n := held(t, promo.IPsKey(k), "2001:db8:7:8::/64"); n != -1 {
		t.Fatalf("the /64 holds %d after the return, want no field", n)
	}
	if r := mustGrab(t, grabCall("r3", "p2", "2001:db8:7:8::2", item(k, 1))); r.Code != CodeOK {
		t.Fatalf("grab after the return: %v", r.Code)
	}
}

// A returned unit can be grabbed again, and a replay of an aborted or cancelled
// request stays refused, answering the entry's state whatever it is.
func TestReturnThenGrabAgain(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	s := baseSpec()
	s.Total, s.PerPin = 1, 1
	mustCreate(t, k, s)
	replay := func(want string) {
		if r := mustGrab(t, grabCall("r1", "p1", "ip", item(k, 1))); r.Code != CodeDuplicate || r.LedgerState != want {
			t.Fatalf("replay: %+v, want DUPLICATE %s", r, want)
		}
	}
	mustGrab(t, grabCall("r1", "p1", "ip", item(k, 1)))
	mustReturn(t, retCall(ReturnAbort, k), ReturnReturned)
	replay(LedgerAborted)
	mustReturn(t, retCall(ReturnFinalize, k), ReturnReturned)
	replay(LedgerAbortRecorded)

	mustGrab(t, grabCall("r2", "p1", "ip", item(k, 1)))
	mustCommit(t, "r2", k)
	c := retCall(ReturnCancel, k)
	c.RequestID = "r2"
	mustReturn(t, c, ReturnReturned)
	if r := mustGrab(t, grabCall("r2", "p1", "ip", item(k, 1))); r.Code != CodeDuplicate || r.LedgerState != LedgerCancelled {
		t.Fatalf("replay after cancel: %+v", r)
	}
	c.Mode = ReturnFinalize
	mustReturn(t, c, ReturnReturned)
	if r := mustGrab(t, grabCall("r2", "p1", "ip", item(k, 1))); r.Code != CodeDuplicate || r.LedgerState != LedgerReturned {
		t.Fatalf("replay after finalize: %+v", r)
	}
	if r := mustGrab(t, grabCall("r3", "p1", "ip", item(k, 1))); r.Code != CodeOK || r.Remaining[0] != 0 {
		t.Fatalf("grab after return: %+v", r)
	}
}

func TestReturnInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := promoKey(t, "k")
	bad := map[string]ReturnCall{
		"empty request": {Pin: "p", Mode: ReturnCancel, Keys: []string{k}},
		"no keys":       {RequestID: "r", Pin: "p", Mode: ReturnCancel},
		"key twice":     {RequestID: "r", Pin: "p", Mode: ReturnAbort, Keys: []string{k, k}},
		"no mode":       {RequestID: "r", Pin: "p", Keys: []string{k}},
		"unknown mode":  {RequestID: "r", Pin: "p", Mode: "rollback", Keys: []string{k}},
	}
	for name, c := range bad {
		if _, err := Return(ctx, rdb, c); err == nil {
			t.Errorf("%s: no error", name)
		}
		if _, err := ParseReturn(QueueReturn(ctx, rdb.Pipeline(), c)); err == nil {
			t.Errorf("%s: queued", name)
		}
	}

	// The script checks its arguments too, before any write.
	mustCreate(t, k, baseSpec())
	mustGrab(t, grabCall("r1", "p1", "ip", item(k, 2)))
	before := stateOf(t, k)
	keys, err := itemKeys([]string{k})
	if err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]interface{}{
		"unknown mode": {"r1", "p1", "rollback", now, ""},
		"empty mode":   {"r1", "p1", "", now, ""},
		"bad nowMs":    {"r1", "p1", "abort", "soon", ""},
		"no reason":    {"r1", "p1", "abort", now},
		"empty rid":    {"", "p1", "abort", now, ""},
	} {
		if err := returnScript.Run(ctx, rdb, keys, args...).Err(); err == nil {
			t.Errorf("script accepted %s", name)
		}
	}
	rdb.HSet(ctx, promo.LedgerKey(k), "r9", `{"s":"Q","p":"p1","i":"ip","n":1}`)
	if _, err := Return(ctx, rdb, ReturnCall{RequestID: "r9", Pin: "p1", Mode: ReturnAbort, NowMs: now, Keys: []string{k}}); err == nil {
		t.Error("unknown ledger state accepted")
	}
	if s := stateOf(t, k); s != before {
		t.Errorf("a refused call wrote: have %+v, want %+v", s, before)
	}
}

func TestReturnReplyParse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		reply []interface{}
		want  ReturnReply
		ok    bool
	}{
		{[]interface{}{int64(0), int64(3)}, ReturnReply{Code: ReturnReturned, Returned: 3}, true},
		{[]interface{}{int64(0)}, ReturnReply{}, false},
		{[]interface{}{int64(1)}, ReturnReply{Code: ReturnAlreadyReturned}, true},
		{[]interface{}{int64(4)}, ReturnReply{Code: ReturnPending}, true},
		{[]interface{}{int64(5)}, ReturnReply{}, false},
	} {
		cmd := redisCmd(ctx, tc.reply)
		have, err := ParseReturn(cmd)
		if (err == nil) != tc.ok || !reflect.DeepEqual(have, tc.want) {
			t.Errorf("%v: have %+v %v, want %+v ok=%v", tc.reply, have, err, tc.want, tc.ok)
		}
	}
}

// redisCmd is a finished command whose reply is val.
func redisCmd(ctx context.Context, val interface{}) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetVal(val)
	return cmd
}
