package lua

import (
	"context"
	"fmt"
	"testing"

	"github.com/flashsale/platform/internal/promo"
)

// partState is what one part of a bucketed grab touches: the hash's remaining, pin
// p1's and ip "ip"'s counters (-1: no field), r1's ledger entry and pending score.
type partState struct {
	Remaining, Pin, IP int64
	Entry, Part        string
	Score              int64
}

func partOf(t *testing.T, k string) partState {
	e, _ := ledger(t, k, "r1")
	return partState{Remaining: mustHash(t, k).Remaining, Pin: held(t, promo.PinsKey(k), "p1"),
		IP: held(t, promo.IPsKey(k), "ip"), Entry: e.State, Part: e.Part, Score: pendingScore(t, k, "r1")}
}

// TestGrabParts: a part checks and takes only its letters, records them in its ledger
// entry, and every return mode gives back exactly those. Parts without stock owe no
// CANCEL, so abort and cancel finish them at once.
func TestGrabParts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		part             string
		remaining        int64 // after the take
		pin, ip          int64
		abortTo, cancelS string // entry state after abort, after cancel
	}{
		{"s", 8, -1, -1, LedgerAborted, LedgerCancelled},
		{"p", 10, 2, -1, LedgerAbortRecorded, LedgerReturned},
		{"i", 10, -1, 2, LedgerAbortRecorded, LedgerReturned},
		{"pi", 10, 2, 2, LedgerAbortRecorded, LedgerReturned},
		{"sp", 8, 2, -1, LedgerAborted, LedgerCancelled},
		{"si", 8, -1, 2, LedgerAborted, LedgerCancelled},
	}
	for _, c := range cases {
		t.Run(c.part, func(t *testing.T) {
			t.Parallel()
			for _, mode := range []ReturnMode{ReturnUndo, ReturnAbort, ReturnCancel} {
				k := promoKey(t, string(mode))
				mustCreate(t, k, baseSpec())
				r := mustGrab(t, grabCall("r1", "p1", "ip", GrabItem{Key: k, Num: 2, Part: c.part}))
				wantRem := c.remaining
				if c.part == "p" || c.part == "i" || c.part == "pi" {
					wantRem = -1 // a part without stock reports no remaining
				}
				if r.Code != CodeOK || r.Remaining[0] != wantRem {
					t.Fatalf("take: %+v, want OK remaining %d", r, wantRem)
				}
				want := partState{c.remaining, c.pin, c.ip, LedgerPending, c.part, deadline}
				if got := partOf(t, k); got != want {
					t.Fatalf("after take: %+v, want %+v", got, want)
				}
				back := partState{Remaining: 10, Pin: -1, IP: -1, Part: c.part, Score: -1}
				switch mode {
				case ReturnUndo:
					back.Part = ""
				case ReturnAbort:
					back.Entry = c.abortTo
				case ReturnCancel:
					if code, err := Commit(ctx, rdb, "r1", []string{k}); err != nil || code != CommitCommitted {
						t.Fatalf("commit: %v %v", code, err)
					}
					back.Entry = c.cancelS
				}
				if back.Entry == LedgerAborted || back.Entry == LedgerCancelled {
					back.Score = 0 // a CANCEL is owed for the stock
				}
				rr, err := Return(ctx, rdb, retCall(mode, k))
				if err != nil || rr.Code != ReturnReturned {
					t.Fatalf("%s: %+v %v", mode, rr, err)
				}
				if got := partOf(t, k); got != back {
					t.Fatalf("after %s: %+v, want %+v", mode, got, back)
				}
			}
		})
	}
}

// TestGrabPartsCheckOnlyTheirLetters: a part without stock passes an empty hash; a
// part without the pin (ip) neither checks nor counts the pin's (ip's) limit; the
// rate window is charged by pin parts only.
func TestGrabPartsCheckOnlyTheirLetters(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "limits")
	s := baseSpec()
	s.Total, s.PerPin, s.PerIP, s.RateLimit, s.RateWindowMs = 1, 1, 1, 2, 60_000
	mustCreate(t, k, s)
	take := func(rid, part string) Code {
		return mustGrab(t, grabCall(rid, "p1", "ip", GrabItem{Key: k, Num: 1, Part: part})).Code
	}
	steps := []struct {
		rid, part string
		want      Code
	}{
		{"a", "s", CodeOK},          // the only unit; no window charged
		{"b", "s", CodeSoldOut},     // stock is checked
		{"c", "pi", CodeOK},         // no stock needed; window 1 of 2
		{"d", "p", CodePinLimit},    // window 2 of 2, then pin p1 is at its limit
		{"e", "i", CodeIPLimit},     // no window: ip "ip" is at its limit
		{"f", "p", CodeRateLimited}, // the window is full
	}
	for _, st := range steps {
		if got := take(st.rid, st.part); got != st.want {
			t.Fatalf("%s (%s): %s, want %s", st.rid, st.part, got, st.want)
		}
	}
	if h := mustHash(t, k); h.WinCount != 2 || h.Remaining != 0 {
		t.Fatalf("hash after the steps: %+v", h)
	}
}

// TestGrabPartsInvalid: a part is a non-empty combination of s, p and i, given for
// every item or none; anything else is a script error that writes nothing.
func TestGrabPartsInvalid(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k1, k2 := promoKey(t, "a"), promoKey(t, "b")
	mustCreate(t, k1, baseSpec())
	mustCreate(t, k2, baseSpec())
	for _, part := range []string{"x", "ss", "ps", "spip", "S"} {
		_, err := Grab(ctx, rdb, grabCall("r-"+part, "p1", "ip", GrabItem{Key: k1, Num: 1, Part: part}))
		if err == nil {
			t.Fatalf("part %q accepted", part)
		}
	}
	// One part for two items: the raw script call, as build always writes all or none.
	a, b := promo.Keys(k1), promo.Keys(k2)
	err := qScript.Run(ctx, rdb, append(a[:], b[:]...), now, "r-short", "h", "p1", "ip", now+5000, 1000, "ip", 0, 1, 1, "s").Err()
	if err == nil {
		t.Fatal("parts for some items only accepted")
	}
	for _, k := range []string{k1, k2} {
		if h := mustHash(t, k); h.Remaining != 10 || held(t, promo.PinsKey(k), "p1") != -1 {
			t.Fatalf("%s changed by refused calls: %+v", k, h)
		}
	}
}

// TestGrabPartWithoutIP: a part n counts the ip nowhere, which q.lua allows only
// while the promotion has no ip limit; else it answers IP_PART_NEEDED before the
// rate window, so the resend with an ip part is not charged twice.
func TestGrabPartWithoutIP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	free, limited := promoKey(t, "free"), promoKey(t, "limited")
	s := baseSpec()
	s.RateLimit, s.RateWindowMs = 5, 60_000
	mustCreate(t, free, s)
	s.PerIP = 1
	mustCreate(t, limited, s)

	if r := mustGrab(t, grabCall("r1", "p1", "ip", GrabItem{Key: free, Num: 1, Part: "spn"})); r.Code != CodeOK {
		t.Fatalf("spn without an ip limit: %+v", r)
	}
	if held(t, promo.IPsKey(free), "ip") != -1 || held(t, promo.PinsKey(free), "p1") != 1 {
		t.Fatal("spn must count the pin and not the ip")
	}
	if e, _ := ledger(t, free, "r1"); e.Part != "spn" {
		t.Fatalf("entry %+v, want k = spn", e)
	}
	if r, err := Return(ctx, rdb, retCall(ReturnUndo, free)); err != nil || r.Code != ReturnReturned {
		t.Fatalf("undo: %+v %v", r, err)
	}
	if h := mustHash(t, free); h.Remaining != 10 || held(t, promo.PinsKey(free), "p1") != -1 {
		t.Fatalf("after undo: remaining %d, pin %d", h.Remaining, held(t, promo.PinsKey(free), "p1"))
	}

	for _, part := range []string{"spn", "pn", "sn"} {
		if r := mustGrab(t, grabCall("r-"+part, "p1", "ip", GrabItem{Key: limited, Num: 1, Part: part})); r.Code != CodeIPPartNeeded {
			t.Fatalf("%s with an ip limit: %+v, want IP_PART_NEEDED", part, r)
		}
	}
	if h := mustHash(t, limited); h.Remaining != 10 || h.WinCount != 0 {
		t.Fatalf("refused parts changed the hash: %+v", h)
	}
	for _, part := range []string{"in", "sin", "n"} {
		if _, err := Grab(ctx, rdb, grabCall("r-bad", "p1", "ip", GrabItem{Key: free, Num: 1, Part: part})); err == nil {
			t.Fatalf("part %q accepted: n is with the stock or the pin, never with the ip", part)
		}
	}
	// The stock part of such a grab keeps n in its entry, so a return or the
	// reconciler reading it alone knows the grab counted the ip nowhere.
	if r := mustGrab(t, grabCall("r-sn", "p2", "ip", GrabItem{Key: free, Num: 1, Part: "sn"})); r.Code != CodeOK {
		t.Fatalf("sn without an ip limit: %+v", r)
	}
	if e, _ := ledger(t, free, "r-sn"); e.Part != "sn" || held(t, promo.PinsKey(free), "p2") != -1 {
		t.Fatalf("entry %+v, want k = sn and no pin counted", e)
	}
}

// TestBucketCountChecked: a hash created as one of K buckets refuses, taking and
// charging nothing, an ordinary item and a part that names another count
// (BUCKETED, with K), and serves a part that names K. A part without a count is not
// checked, and an ordinary promotion refuses a part that calls it bucketed.
func TestBucketCountChecked(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	spec := baseSpec()
	spec.Buckets = 4
	mustCreate(t, k, spec)
	plain := promoKey(t, "plain")
	mustCreate(t, plain, baseSpec())
	cases := []struct {
		key  string
		item GrabItem
		want Code
		k    int
	}{
		{k, GrabItem{Key: k, Num: 1}, CodeBucketed, 4},
		{k, GrabItem{Key: k, Num: 1, Part: "sp", Buckets: 2}, CodeBucketed, 4},
		{k, GrabItem{Key: k, Num: 1, Part: promo.PartAll, Buckets: 1}, CodeBucketed, 4},
		{plain, GrabItem{Key: plain, Num: 1, Part: "sp", Buckets: 4}, CodeBucketed, 1},
	}
	for i, c := range cases {
		r := mustGrab(t, grabCall(fmt.Sprintf("r%d", i), "p1", "ip", c.item))
		if r.Code != c.want || r.Buckets != c.k || r.IPLimit {
			t.Errorf("%+v: %+v, want %s with %d buckets and no ip limit", c.item, r, c.want, c.k)
		}
	}
	// BUCKETED says whether the grab must count the ip (perIp > 0).
	limited := promoKey(t, "limited")
	spec.PerIP = 3
	mustCreate(t, limited, spec)
	if r := mustGrab(t, grabCall("r-limited", "p1", "ip", GrabItem{Key: limited, Num: 1})); r.Code != CodeBucketed || !r.IPLimit {
		t.Errorf("a bucketed promotion with an ip limit: %+v, want BUCKETED with IPLimit", r)
	}
	if got := partOf(t, k); got.Remaining != 10 || got.Pin != -1 || got.IP != -1 {
		t.Fatalf("a refused grab changed the bucket: %+v", got)
	}
	if r := mustGrab(t, grabCall("ok", "p1", "ip", GrabItem{Key: k, Num: 2, Part: "sp", Buckets: 4})); r.Code != CodeOK || r.Remaining[0] != 8 {
		t.Fatalf("a part naming the count: %+v, want OK remaining 8", r)
	}
	if r := mustGrab(t, grabCall("unchecked", "p1", "ip", GrabItem{Key: k, Num: 1, Part: "s"})); r.Code != CodeOK {
		t.Fatalf("a part without a count: %+v, want OK", r)
	}
	if n := held(t, promo.PinsKey(k), "p1"); n != 2 {
		t.Fatalf("pin counted %d, want 2 (the sp part only)", n)
	}
}
