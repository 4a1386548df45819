package lua

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/flashsale/platform/internal/promo"
)

// changesOf is what a reply announced, as "STATE" strings, checking each change
// names key, is in the outbox, and orders after the one before.
func changesOf(t *testing.T, key string, changes []promo.StateChange) []string {
	t.Helper()
	var out []string
	for _, c := range changes {
		if c.Key != key {
			t.Fatalf("change %+v names another promotion than %s", c, key)
		}
		if _, err := rdb.ZScore(context.Background(), promo.StateOutboxKey, c.Member).Result(); err != nil {
			t.Fatalf("change %s is not in the outbox: %v", c.Member, err)
		}
		out = append(out, c.State)
	}
	return out
}

// outboxOf is every change of key left in the shared outbox, by seq.
func outboxOf(t *testing.T, key string) []promo.StateChange {
	t.Helper()
	members, err := rdb.ZRange(context.Background(), promo.StateOutboxKey, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []promo.StateChange
	for _, m := range members {
		c, err := ParseStateChange(m)
		if err != nil {
			t.Fatal(err)
		}
		if c.Key == key {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b promo.StateChange) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

func wantStates(t *testing.T, step string, have []string, want ...string) {
	t.Helper()
	if strings.Join(have, ",") != strings.Join(want, ",") {
		t.Fatalf("%s announced %v, want %v", step, have, want)
	}
}

// TestStateChanges walks one promotion through every change of its sale state and
// the calls that must not announce one, then checks the outbox holds exactly the
// changes announced, each seq above the last and at least its time.
func TestStateChanges(t *testing.T) {
	ctx := context.Background()
	k := promoKey(t, "st")
	spec := baseSpec()
	spec.Total = 2
	mustCreate(t, k, spec)
	var all []string

	grab := func(rid string, num int64, want ...string) {
		t.Helper()
		r := mustGrab(t, grabCall(rid, "p-"+rid, "ip-"+rid, item(k, num)))
		got := changesOf(t, k, r.Changes)
		wantStates(t, "grab "+rid, got, want...)
		all = append(all, got...)
	}
	ret := func(rid string, mode ReturnMode, at int64, want ...string) {
		t.Helper()
		r, err := Return(ctx, rdb, ReturnCall{RequestID: rid, Pin: "p-" + rid, Mode: mode, NowMs: at, Reason: "BUYER", Keys: []string{k}})
		if err != nil || r.Code != ReturnReturned {
			t.Fatalf("%s %s: %+v %v", mode, rid, r, err)
		}
		got := changesOf(t, k, r.Changes)
		wantStates(t, string(mode)+" "+rid, got, want...)
		all = append(all, got...)
	}
	patch := func(ver, total, endMs, at int64, want ...string) {
		t.Helper()
		s := spec
		s.Ver, s.Total, s.EndMs = ver, total, endMs
		r, err := Patch(ctx, rdb, onShard, k, s, at)
		if err != nil || r.Code != AdminOK {
			t.Fatalf("patch v%d: %+v %v", ver, r, err)
		}
		got := changesOf(t, k, r.Changes)
		wantStates(t, fmt.Sprintf("patch v%d", ver), got, want...)
		all = append(all, got...)
	}

	grab("a", 1)                              // 2 -> 1: nothing to say
	grab("b", 1, StateSoldOut)                // 1 -> 0
	grab("c", 1)                              // refused SOLD_OUT: no change
	ret("a", ReturnUndo, now, StateRestocked) // 0 -> 1: the unit is for sale again
	grab("d", 1, StateSoldOut)
	if c, err := Commit(ctx, rdb, "d", []string{k}); err != nil || c != CommitCommitted {
		t.Fatal(c, err)
	}
	ret("d", ReturnCancel, now, StateRestocked)  // a buyer's cancel restocks
	patch(2, 1, spec.EndMs, now, StateSoldOut)   // total down to what is granted (b)
	patch(3, 1, spec.EndMs, now)                 // no crossing: nothing
	patch(4, 3, spec.EndMs, now, StateRestocked) // total up again
	patch(5, 3, now+1000, now)                   // end moved, sale still live
	if r := mustGrab(t, GrabCall{NowMs: now + 1000, DeadlineMs: now + 6000, RequestID: "e", BodyHash: "h", Pin: "p", IP: "i",
		RateFactorPermille: 1000, Items: []GrabItem{item(k, 1)}}); r.Code != CodeEnded {
		t.Fatalf("grab at the end: %+v", r)
	} else {
		all = append(all, changesOf(t, k, r.Changes)...)
	}
	if r := mustGrab(t, GrabCall{NowMs: now + 2000, DeadlineMs: now + 7000, RequestID: "f", BodyHash: "h", Pin: "p", IP: "i",
		RateFactorPermille: 1000, Items: []GrabItem{item(k, 1)}}); r.Code != CodeEnded || len(r.Changes) != 0 {
		t.Fatalf("second grab after the end: %+v, want ENDED announcing nothing", r)
	}
	if c, settled, err := Ended(ctx, rdb, k, promo.StateOutboxKey, now+3000); err != nil || len(c) != 0 || !settled {
		t.Fatalf("ended.lua after q.lua announced ENDED: %+v %v %v", c, settled, err)
	}
	patch(6, 3, now+9000, now+3000, StateRestocked) // a later end reopens the sale
	r, err := Stop(ctx, rdb, onShard, k, 7, now+4000)
	if err != nil || r.Code != AdminOK {
		t.Fatal(r, err)
	}
	all = append(all, changesOf(t, k, r.Changes)...)
	if r, err := Stop(ctx, rdb, onShard, k, 8, now+4000); err != nil || len(r.Changes) != 0 {
		t.Fatalf("second stop: %+v %v, want no change", r, err)
	}
	if c, err := Commit(ctx, rdb, "b", []string{k}); err != nil || c != CommitCommitted {
		t.Fatal(c, err)
	}
	ret("b", ReturnCancel, now+4000) // stock back on a stopped promotion: no RESTOCKED
	r, err = Delete(ctx, rdb, onShard, k, 9, now+5000)
	if err != nil || r.Code != AdminOK {
		t.Fatal(r, err)
	}
	all = append(all, changesOf(t, k, r.Changes)...)
	if r, err := Delete(ctx, rdb, onShard, k, 10, now+5000); err != nil || len(r.Changes) != 0 {
		t.Fatalf("second delete: %+v %v, want no change", r, err)
	}

	want := []string{StateSoldOut, StateRestocked, StateSoldOut, StateRestocked, StateSoldOut, StateRestocked,
		StateEnded, StateRestocked, StateStopped, StateDeleted}
	wantStates(t, "the walk", all, want...)
	outbox := outboxOf(t, k)
	var states []string
	for i, c := range outbox {
		states = append(states, c.State)
		if c.Seq < c.AtMs || (i > 0 && c.Seq <= outbox[i-1].Seq) {
			t.Errorf("change %d %+v: seq below its time or not above %d", i, c, outbox[i-1].Seq)
		}
	}
	wantStates(t, "the outbox", states, want...)

	// A promotion made again under the same key, later, keeps counting up.
	mustCreate(t, k, spec)
	g := mustGrab(t, GrabCall{NowMs: now + 6000, DeadlineMs: now + 9000, RequestID: "g", BodyHash: "h", Pin: "p", IP: "i",
		RateFactorPermille: 1000, Items: []GrabItem{item(k, 2)}})
	if len(g.Changes) != 1 || g.Changes[0].Seq <= outbox[len(outbox)-1].Seq {
		t.Errorf("changes after re-creating %+v, want one with seq above the deleted promotion's %d", g.Changes, outbox[len(outbox)-1].Seq)
	}
}

// TestEndedAnnouncesOnce: ended.lua says nothing before the end, nor for a
// stopped or missing promotion, and ENDED once after it.
func TestEndedAnnouncesOnce(t *testing.T) {
	ctx := context.Background()
	k, stopped := promoKey(t, "live"), promoKey(t, "stopped")
	mustCreate(t, k, baseSpec())
	s := baseSpec()
	s.State = "STOPPED"
	mustCreate(t, stopped, s)
	end := baseSpec().EndMs
	for _, tc := range []struct {
		key     string
		at      int64
		want    []string
		settled bool
	}{
		{k, end - 1, nil, false},
		{promoKey(t, "missing"), end, nil, true},
		{stopped, end, nil, true},
		{k, end, []string{StateEnded}, true},
		{k, end + 1, nil, true},
	} {
		c, settled, err := Ended(ctx, rdb, tc.key, promo.StateOutboxKey, tc.at)
		if err != nil || settled != tc.settled {
			t.Fatalf("ended.lua on %s at end%+d: settled %v (err %v), want %v", tc.key, tc.at-end, settled, err, tc.settled)
		}
		wantStates(t, fmt.Sprintf("ended.lua on %s at end%+d", tc.key, tc.at-end), changesOf(t, tc.key, c), tc.want...)
	}
}

// TestAStockPartAnnouncesItsHash: a stock part of an ordinary hash (one bucket)
// is that promotion's stock, so it announces its SOLD_OUT like a whole item.
func TestAStockPartAnnouncesItsHash(t *testing.T) {
	part, plain := promoKey(t, "part"), promoKey(t, "plain")
	s := baseSpec()
	s.Total = 1
	mustCreate(t, part, s)
	mustCreate(t, plain, s)
	r := mustGrab(t, grabCall("r1", "p1", "ip1", GrabItem{Key: part, Num: 1, Part: promo.PartStock}, GrabItem{Key: plain, Num: 1, Part: promo.PartAll}))
	if r.Code != CodeOK || len(r.Changes) != 2 || r.Changes[0].Key != part || r.Changes[1].Key != plain ||
		r.Changes[0].State != StateSoldOut || r.Changes[1].State != StateSoldOut {
		t.Fatalf("grab: %+v, want OK announcing SOLD_OUT of %s and %s", r, part, plain)
	}
}

// TestBucketsAnnounceAsTheirPromotion: the buckets of a promotion in buckets
// announce their own stock (a sell-out, a restock, a patch crossing 0) only as
// BUCKET_EMPTY and BUCKET_FILLED under their own key, for bucket 0 to hear
// (TestBucketStateRelay); bucket 0, the promotion key, announces the sale's
// STOPPED, ENDED and DELETED, the other buckets nothing of the sale.
func TestBucketsAnnounceAsTheirPromotion(t *testing.T) {
	ctx := context.Background()
	b0 := promoKey(t, "bk")
	b1 := b0 + ":b1"
	s := baseSpec()
	s.Total, s.Buckets = 1, 2
	for _, k := range []string{b0, b1} {
		mustCreate(t, k, s)
		r := mustGrab(t, grabCall("r-"+k, "p1", "ip1", GrabItem{Key: k, Num: 1, Part: promo.PartAll, Buckets: 2}))
		if r.Code != CodeOK {
			t.Fatalf("%s sold out: %+v", k, r)
		}
		wantStates(t, k+" sold out", changesOf(t, k, r.Changes), StateBucketEmpty)
		rr, err := Return(ctx, rdb, ReturnCall{RequestID: "r-" + k, Pin: "p1", Mode: ReturnUndo, NowMs: now, Keys: []string{k}})
		if err != nil || rr.Code != ReturnReturned {
			t.Fatalf("%s restocked: %+v %v", k, rr, err)
		}
		wantStates(t, k+" restocked", changesOf(t, k, rr.Changes), StateBucketFilled)
		p := s
		p.Ver, p.Total = 2, 0
		pr, err := Patch(ctx, rdb, onShard, k, p, now)
		if err != nil || pr.Code != AdminOK {
			t.Fatalf("%s patched to 0: %+v %v", k, pr, err)
		}
		wantStates(t, k+" patched to 0", changesOf(t, k, pr.Changes), StateBucketEmpty)
	}
	for k, want := range map[string][]string{b0: {StateStopped}, b1: nil} {
		r, err := Stop(ctx, rdb, onShard, k, 3, now)
		if err != nil || r.Code != AdminOK {
			t.Fatalf("stop %s: %+v %v", k, r, err)
		}
		wantStates(t, "stop "+k, changesOf(t, b0, r.Changes), want...)
		d, err := Delete(ctx, rdb, onShard, k, 4, now)
		if err != nil || d.Code != AdminOK {
			t.Fatalf("delete %s: %+v %v", k, d, err)
		}
		if k == b0 {
			want = []string{StateDeleted}
		}
		wantStates(t, "delete "+k, changesOf(t, b0, d.Changes), want...)
	}
	for _, c := range outboxOf(t, b1) {
		if c.State != StateBucketEmpty && c.State != StateBucketFilled {
			t.Fatalf("bucket 1 announced %s of the sale", c.State)
		}
	}
}

// TestStateDueLeases: the outbox hands a change to the reconciler only once its
// publisher has had the grace, and to one reconciler at a time.
func TestStateDueLeases(t *testing.T) {
	ctx := context.Background()
	k := promoKey(t, "due")
	s := baseSpec()
	s.Total = 1
	mustCreate(t, k, s)
	r := mustGrab(t, grabCall("r1", "p1", "ip1", item(k, 1)))
	if len(r.Changes) != 1 {
		t.Fatalf("grab: %+v", r)
	}
	mine := func(cs []promo.StateChange) (n int) {
		for _, c := range cs {
			if c.Member == r.Changes[0].Member {
				n++
			}
		}
		return n
	}
	const grace = 5000
	steps := []struct {
		at   int64
		want int
	}{
		{now + grace - 1, 0}, // its publisher's time
		{now + grace, 1},     // leased to this caller...
		{now + grace + 1, 0}, // ...so not to the next one
		{now + 2*grace, 1},   // the lease ran out unpublished: again
	}
	for _, st := range steps {
		due, err := StateDue(ctx, rdb, promo.StateOutboxKey, st.at, grace, 1000)
		if err != nil || mine(due) != st.want {
			t.Fatalf("due at now+%d: %d of the change (err %v), want %d", st.at-now, mine(due), err, st.want)
		}
	}
	if _, err := StateDue(ctx, rdb, promo.StateOutboxKey, now, 0, 10); err == nil {
		t.Error("a grace of 0 accepted")
	}
}
