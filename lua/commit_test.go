package lua

import (
	"context"
	"testing"
)

func TestCommit(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// setup runs on two fresh promotions a, b and returns the keys to commit.
		setup     func(t *testing.T, a, b string) []string
		want      CommitCode
		wantState []string // ledger state of "r1" on a and b afterwards ("" = none)
	}{
		{"pending becomes committed", func(t *testing.T, a, b string) []string {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 1)))
			return []string{a}
		}, CommitCommitted, []string{"G", ""}},
		{"committed again is still committed", func(t *testing.T, a, b string) []string {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 1)))
			mustCommit(t, "r1", a)
			return []string{a}
		}, CommitCommitted, []string{"G", ""}},
		{"multi item", func(t *testing.T, a, b string) []string {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 1), item(b, 2)))
			return []string{a, b}
		}, CommitCommitted, []string{"G", "G"}},
		{"missing entry", func(t *testing.T, a, b string) []string {
			return []string{a}
		}, CommitNotFound, []string{"", ""}},
		{"one entry missing changes nothing", func(t *testing.T, a, b string) []string {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 1)))
			return []string{a, b}
		}, CommitNotFound, []string{"P", ""}},
		{"returned entry is a conflict", func(t *testing.T, a, b string) []string {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 1)))
			mustReturn(t, ReturnCall{RequestID: "r1", Pin: "p1", OnlyPending: true, NowMs: now, Keys: []string{a}}, ReturnReturned)
			return []string{a}
		}, CommitReturned, []string{"R", ""}},
		{"one returned entry changes nothing", func(t *testing.T, a, b string) []string {
			mustGrab(t, grabCall("r1", "p1", "ip", item(a, 1), item(b, 1)))
			mustReturn(t, ReturnCall{RequestID: "r1", Pin: "p1", NowMs: now, Keys: []string{b}}, ReturnReturned)
			return []string{a, b}
		}, CommitReturned, []string{"P", "R"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, b := promoKey(t, "a"), promoKey(t, "b")
			mustCreate(t, a, baseSpec())
			mustCreate(t, b, baseSpec())
			keys := tc.setup(t, a, b)
			have, err := Commit(context.Background(), rdb, "r1", keys)
			if err != nil || have != tc.want {
				t.Fatalf("have %v %v, want %v", have, err, tc.want)
			}
			for i, k := range []string{a, b} {
				e, _ := ledger(t, k, "r1")
				if e.State != tc.wantState[i] {
					t.Errorf("ledger of %s: state %q, want %q", k, e.State, tc.wantState[i])
				}
				// Only a P entry is pending.
				if inPending := pendingScore(t, k, "r1") >= 0; inPending != (e.State == "P") {
					t.Errorf("%s: state %q but pending=%v", k, e.State, inPending)
				}
			}
		})
	}
}

func TestCommitInvalid(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	if _, err := Commit(context.Background(), rdb, "", []string{k}); err == nil {
		t.Error("empty requestId accepted")
	}
	if _, err := Commit(context.Background(), rdb, "r1", nil); err == nil {
		t.Error("no keys accepted")
	}
	if _, err := Commit(context.Background(), rdb, "r1", []string{k, k}); err == nil {
		t.Error("key twice accepted")
	}
	if _, err := ParseCommit(QueueCommit(context.Background(), rdb.Pipeline(), "", []string{k})); err == nil {
		t.Error("queued an invalid commit")
	}
}

func mustCommit(t *testing.T, rid string, keys ...string) {
	code, err := Commit(context.Background(), rdb, rid, keys)
	if err != nil || code != CommitCommitted {
		t.Fatalf("commit %s: %v %v", rid, code, err)
	}
}

func mustReturn(t *testing.T, c ReturnCall, want ReturnCode) ReturnReply {
	r, err := Return(context.Background(), rdb, c)
	if err != nil || r.Code != want {
		t.Fatalf("return %s: %+v %v, want %v", c.RequestID, r, err, want)
	}
	return r
}
