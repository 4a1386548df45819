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
			putStates(t, [2]string{a, b}, [2]string{LedgerPending})
			return []string{a}
		}, CommitCommitted, []string{"G", ""}},
		{"committed again is still committed", func(t *testing.T, a, b string) []string {
			putStates(t, [2]string{a, b}, [2]string{LedgerCommitted})
			return []string{a}
		}, CommitCommitted, []string{"G", ""}},
		{"multi item", func(t *testing.T, a, b string) []string {
			putStates(t, [2]string{a, b}, [2]string{LedgerPending, LedgerPending})
			return []string{a, b}
		}, CommitCommitted, []string{"G", "G"}},
		{"multi item, one already committed", func(t *testing.T, a, b string) []string {
			putStates(t, [2]string{a, b}, [2]string{LedgerCommitted, LedgerPending})
			return []string{a, b}
		}, CommitCommitted, []string{"G", "G"}},
		{"missing entry", func(t *testing.T, a, b string) []string {
			return []string{a}
		}, CommitNotFound, []string{"", ""}},
		{"one entry missing changes nothing", func(t *testing.T, a, b string) []string {
			putStates(t, [2]string{a, b}, [2]string{LedgerPending})
			return []string{a, b}
		}, CommitNotFound, []string{"P", ""}},
		{"aborted entry is a conflict", func(t *testing.T, a, b string) []string {
			putStates(t, [2]string{a, b}, [2]string{LedgerAborted})
			return []string{a}
		}, CommitReturned, []string{"A", ""}},
		{"abort-recorded entry is a conflict", func(t *testing.T, a, b string) []string {
			putStates(t, [2]string{a, b}, [2]string{LedgerAbortRecorded})
			return []string{a}
		}, CommitReturned, []string{"X", ""}},
		{"cancelled entry is a conflict", func(t *testing.T, a, b string) []string {
			putStates(t, [2]string{a, b}, [2]string{LedgerCancelled})
			return []string{a}
		}, CommitReturned, []string{"C", ""}},
		{"returned entry is a conflict", func(t *testing.T, a, b string) []string {
			putStates(t, [2]string{a, b}, [2]string{LedgerReturned})
			return []string{a}
		}, CommitReturned, []string{"R", ""}},
		{"one aborted entry changes nothing", func(t *testing.T, a, b string) []string {
			putStates(t, [2]string{a, b}, [2]string{LedgerPending, LedgerAborted})
			return []string{a, b}
		}, CommitReturned, []string{"P", "A"}},
		{"one cancelled entry changes nothing", func(t *testing.T, a, b string) []string {
			putStates(t, [2]string{a, b}, [2]string{LedgerCommitted, LedgerCancelled})
			return []string{a, b}
		}, CommitReturned, []string{"G", "C"}},
		{"one returned entry changes nothing", func(t *testing.T, a, b string) []string {
			putStates(t, [2]string{a, b}, [2]string{LedgerPending, LedgerReturned})
			return []string{a, b}
		}, CommitReturned, []string{"P", "R"}},
		{"an undone take is not found", func(t *testing.T, a, b string) []string {
			putStates(t, [2]string{a, b}, [2]string{LedgerPending})
			mustReturn(t, retCall(ReturnUndo, a), ReturnReturned)
			return []string{a}
		}, CommitNotFound, []string{"", ""}},
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
				// State, counters and pending membership all follow the entry's state.
				if s, w := stateOf(t, k), expect(tc.wantState[i], nums[i]); s != w {
					t.Errorf("promotion %d: have %+v, want %+v", i, s, w)
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
