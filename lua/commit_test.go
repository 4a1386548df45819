package lua

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// commitCase is a commit of "r1" on two fresh promotions a and b.
type commitCase struct {
	name string
	// setup runs on two fresh promotions a, b and returns the keys to commit.
	setup     func(t *testing.T, a, b string) []string
	want      CommitCode
	wantState []string // ledger state of "r1" on a and b afterwards ("" = none)
}

// check says whether a and b are as the case wants them after its commit: state,
// counters and pending membership all follow the entry's state.
func (tc commitCase) check(t *testing.T, a, b string) {
	t.Helper()
	for i, k := range []string{a, b} {
		if s, w := stateOf(t, k), expect(tc.wantState[i], nums[i]); s != w {
			t.Errorf("%s, promotion %d: have %+v, want %+v", tc.name, i, s, w)
		}
	}
}

func commitCases() []commitCase {
	return []commitCase{
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
}

// twoPromotions creates the fresh promotions a and b of a commit case.
func twoPromotions(t *testing.T) (a, b string) {
	a, b = promoKey(t, "a"), promoKey(t, "b")
	mustCreate(t, a, baseSpec())
	mustCreate(t, b, baseSpec())
	return a, b
}

// Every case, committed two ways: by commit.lua alone, and riding a take of the
// same promotions (GrabCall.Commits), which must answer and change the same.
// The take is refused (TOO_MANY, before anything is charged), so what changes
// is the commit's alone.
func TestCommit(t *testing.T) {
	t.Parallel()
	ways := map[string]func(t *testing.T, keys []string) (CommitCode, error){
		"alone": func(t *testing.T, keys []string) (CommitCode, error) {
			return Commit(context.Background(), rdb, "r1", keys)
		},
		"riding a take": func(t *testing.T, keys []string) (CommitCode, error) {
			call := grabCall("t1", "p9", "10.9.9.9")
			for _, k := range keys {
				call.Items = append(call.Items, item(k, 99))
			}
			call.Commits = []string{"r1"}
			r, codes, err := GrabCommitting(context.Background(), rdb, call)
			if err != nil || r.Code != CodeTooMany || len(codes) != 1 {
				t.Fatalf("the take answered %+v %v %v, want TOO_MANY and one code", r, codes, err)
			}
			return codes[0], nil
		},
	}
	for way, commit := range ways {
		for _, tc := range commitCases() {
			t.Run(way+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				a, b := twoPromotions(t)
				have, err := commit(t, tc.setup(t, a, b))
				if err != nil || have != tc.want {
					t.Fatalf("have %v %v, want %v", have, err, tc.want)
				}
				tc.check(t, a, b)
			})
		}
	}
}

// Every case of TestCommit in one batch call, on promotions of its own: each
// request is decided alone, whatever its neighbours answer, as in a call of its own.
func TestCommitBatch(t *testing.T) {
	t.Parallel()
	cases := commitCases()
	var calls []CommitCall
	var promos [][2]string
	for _, tc := range cases {
		a, b := twoPromotions(t)
		calls = append(calls, CommitCall{RequestID: "r1", Keys: tc.setup(t, a, b)})
		promos = append(promos, [2]string{a, b})
	}
	codes, err := ParseCommits(queueCommitsNow(t, calls), len(calls))
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range cases {
		if codes[i] != tc.want {
			t.Errorf("%s: have %v, want %v", tc.name, codes[i], tc.want)
		}
		tc.check(t, promos[i][0], promos[i][1])
	}
}

// queueCommitsNow runs QueueCommits in a pipeline of its own.
func queueCommitsNow(t *testing.T, calls []CommitCall) *redis.Cmd {
	t.Helper()
	p := rdb.Pipeline()
	cmd := QueueCommits(context.Background(), p, calls)
	_, _ = p.Exec(context.Background())
	return cmd
}

// A batch whose arguments are malformed, or one of whose requests holds an entry
// in no known state, fails whole before any write: the requests before it in the
// batch are not committed either.
func TestCommitBatchFailsWhole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoPromotions(t)
	putStates(t, [2]string{a, b}, [2]string{LedgerPending, LedgerPending})
	ka, kb := promo.Keys(a), promo.Keys(b)
	keys := append(ka[:], kb[:]...)
	for _, args := range [][]any{
		{"r1", 1, "r1", 2},   // three items for two promotions
		{"r1", 1, "r1"},      // a request without its count
		{"r1", 0, "r1", 2},   // a request of no items
		{"r1", 1, "", 1},     // an empty requestId
		{"r1", 1.5, "r1", 1}, // half an item
	} {
		if err := commitScript.Run(ctx, rdb, keys, args...).Err(); err == nil {
			t.Errorf("args %v: accepted", args)
		}
	}
	// r2's entry on b is corrupt; r1 on a comes first in the batch and stays P.
	if err := rdb.HSet(ctx, kb[3], "r2", `{"s":"Z","h":"x"}`).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseCommits(queueCommitsNow(t, []CommitCall{{"r1", []string{a}}, {"r2", []string{b}}}), 2); err == nil {
		t.Fatal("a batch with an unknown ledger state committed")
	}
	if s, w := stateOf(t, a), expect(LedgerPending, nums[0]); s != w {
		t.Errorf("the request before the corrupt one: have %+v, want %+v", s, w)
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
	for _, c := range []CommitCall{{"", []string{k}}, {"r1", nil}, {"r1", []string{k, k}}} {
		if _, err := ParseCommits(queueCommitsNow(t, []CommitCall{{"r1", []string{k}}, c}), 2); err == nil {
			t.Errorf("%+v: queued in a batch", c)
		}
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

// Commits riding a take that takes: the take is made and every rider committed,
// in one call; a rider of the same requestId twice, or one already committed,
// answers COMMITTED again, and one unknown NOT_FOUND without stopping the others.
func TestCommitsRideATakeThatTakes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := promoKey(t, "k")
	mustCreate(t, k, baseSpec())
	for _, rid := range []string{"r1", "r2", "r3"} {
		if r := mustGrab(t, grabCall(rid, "p-"+rid, "10.0.0.1", item(k, 1))); r.Code != CodeOK {
			t.Fatalf("grab %s: %+v", rid, r)
		}
	}
	mustCommit(t, "r3", k)
	call := grabCall("r4", "p-r4", "10.0.0.1", item(k, 1))
	call.Commits = []string{"r1", "r2", "r1", "r3", "nobody"}
	r, codes, err := GrabCommitting(ctx, rdb, call)
	if err != nil || r.Code != CodeOK || len(r.Remaining) != 1 || r.Remaining[0] != 6 {
		t.Fatalf("take: %+v %v", r, err)
	}
	want := []CommitCode{CommitCommitted, CommitCommitted, CommitCommitted, CommitCommitted, CommitNotFound}
	if !slices.Equal(codes, want) {
		t.Fatalf("codes %v, want %v", codes, want)
	}
	ledger, pending := promo.Keys(k)[3], promo.Keys(k)[4]
	for rid, state := range map[string]string{"r1": "G", "r2": "G", "r3": "G", "r4": "P"} {
		raw, err := rdb.HGet(ctx, ledger, rid).Result()
		if err != nil || !strings.Contains(raw, `"s":"`+state+`"`) {
			t.Errorf("%s: entry %q %v, want state %s", rid, raw, err, state)
		}
		inPending := rdb.ZScore(ctx, pending, rid).Err() == nil
		if inPending != (state == "P") {
			t.Errorf("%s: in pending %v, state %s", rid, inPending, state)
		}
	}
	// A plain Grab refuses riders, which its reply could not carry.
	if _, err := Grab(ctx, rdb, call); err == nil {
		t.Error("Grab took commits")
	}
	for _, bad := range [][]string{{""}, {"a,b"}} {
		c := grabCall("r5", "p-r5", "10.0.0.1", item(k, 1))
		c.Commits = bad
		if _, _, err := GrabCommitting(ctx, rdb, c); err == nil {
			t.Errorf("commits %q accepted", bad)
		}
	}
}

// A rider whose entry is in no known state stops the call before any write: the
// take is not made and the other riders are not committed.
func TestCommitRiderUnknownStateWritesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := promoKey(t, "k")
	mustCreate(t, k, baseSpec())
	if r := mustGrab(t, grabCall("r1", "p1", "ip", item(k, 1))); r.Code != CodeOK {
		t.Fatalf("grab: %+v", r)
	}
	if err := rdb.HSet(ctx, promo.Keys(k)[3], "bad", `{"s":"Z","h":"x"}`).Err(); err != nil {
		t.Fatal(err)
	}
	call := grabCall("r2", "p2", "10.0.0.1", item(k, 1))
	call.Commits = []string{"r1", "bad"}
	if _, _, err := GrabCommitting(ctx, rdb, call); err == nil {
		t.Fatal("a rider in an unknown state was accepted")
	}
	if s, w := stateOf(t, k), expect(LedgerPending, 1); s != w {
		t.Errorf("after the refused call: have %+v, want %+v (r1 still pending, r2 not taken)", s, w)
	}
}
