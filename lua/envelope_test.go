package lua

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// poolParts are the parts of every pool test: 5 envelopes, 100 in all, handed out
// in this order.
var poolParts = []int64{30, 10, 25, 15, 20}

func poolSpec() AdminSpec {
	s := baseSpec()
	s.Total, s.Envelope = int64(len(poolParts)), slices.Clone(poolParts)
	return s
}

// poolLeft is the pool's zset as members, lowest idx first.
func poolLeft(t *testing.T, key string) []string {
	t.Helper()
	m, err := rdb.ZRange(context.Background(), promo.EnvelopeKey(key), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// members are the pool members of the parts idx.
func members(idx ...int) []string {
	out := make([]string, 0, len(idx))
	for _, i := range idx {
		out = append(out, EnvelopeMember(i, poolParts[i]))
	}
	return out
}

func TestCreateMovesAStagedPoolIntoPlaceWithTheHash(t *testing.T) {
	ctx := context.Background()
	key := promoKey(t, "pool")
	mustCreate(t, key, poolSpec())
	h := mustHash(t, key)
	if !h.IsPool() || h.EnvAmount != 100 || h.EnvLeft != 100 || h.Remaining != 5 || h.Total != 5 {
		t.Fatalf("hash %+v: want a pool of 5 worth 100", h)
	}
	if got := poolLeft(t, key); !reflect.DeepEqual(got, members(0, 1, 2, 3, 4)) {
		t.Fatalf("pool %v", got)
	}
	if n := rdb.Exists(ctx, promo.EnvelopeStagingKey(key)).Val(); n != 0 {
		t.Fatal("the staging key outlived the create")
	}
	if ttl := rdb.PTTL(ctx, promo.EnvelopeKey(key)).Val(); ttl != -1 {
		t.Fatalf("the pool kept the staging's expiry: %v", ttl)
	}

	// The same create again changes nothing (its staged parts are dropped); another
	// version is EXISTS; a split whose parts are not total is refused before Redis.
	_, _ = Grab(ctx, rdb, grabCall("r1", "p1", "ip", GrabItem{Key: key, Num: 2}))
	for ver, want := range map[int64]AdminCode{1: AdminAlreadyApplied, 2: AdminExists} {
		s := poolSpec()
		s.Ver = ver
		if code, err := Create(ctx, rdb, onShard, key, s); err != nil || code != want {
			t.Fatalf("create again at ver %d: %v %v, want %v", ver, code, err, want)
		}
	}
	other := poolSpec() // the same version with another split: another create's
	other.Envelope[0], other.Envelope[1] = 10, 30
	if code, err := Create(ctx, rdb, onShard, key, other); err != nil || code != AdminExists {
		t.Fatalf("create again with another split: %v %v, want EXISTS", code, err)
	}
	if got := poolLeft(t, key); !reflect.DeepEqual(got, members(2, 3, 4)) || rdb.Exists(ctx, promo.EnvelopeStagingKey(key)).Val() != 0 {
		t.Fatalf("a repeated create touched the live pool: %v", got)
	}
	if h := mustHash(t, key); h.EnvDigest != EnvelopeDigest(poolParts) {
		t.Fatalf("envDigest %q, want the split's", h.EnvDigest)
	}
	bad := poolSpec()
	bad.Envelope = bad.Envelope[:4]
	if _, err := Create(ctx, rdb, onShard, promoKey(t, "short"), bad); err == nil {
		t.Fatal("a pool of 4 parts for total 5 was created")
	}
	bucketed := poolSpec()
	bucketed.Buckets = 2
	if _, err := Create(ctx, rdb, onShard, promoKey(t, "bucketed"), bucketed); err == nil {
		t.Fatal("a pool in buckets was created")
	}
}

// A staging that does not hold total parts (another create restaging the key
// meanwhile) is a script error, and nothing is created.
func TestCreateRefusesAPoolStagedIncompletely(t *testing.T) {
	ctx := context.Background()
	key := promoKey(t, "pool")
	s := poolSpec()
	ks := promo.Keys(key)
	staging := promo.EnvelopeStagingKey(key)
	rdb.ZAdd(ctx, staging, redis.Z{Score: 0, Member: EnvelopeMember(0, 30)})
	args := append(s.args(), s.State, int64(0), 1, int64(100), EnvelopeDigest(poolParts))
	if _, err := createScript.Run(ctx, rdb, append(ks[:], promo.FenceKey(onShard), staging), args...).Result(); err == nil {
		t.Fatal("create.lua accepted a staging of 1 part for total 5")
	}
	if rdb.Exists(ctx, key).Val() != 0 {
		t.Fatal("the hash was created")
	}
}

func TestGrabHandsOutTheLowestPartsAndAnswersTheirSum(t *testing.T) {
	ctx := context.Background()
	key, plain := promoKey(t, "pool"), promoKey(t, "plain")
	mustCreate(t, key, poolSpec())
	mustCreate(t, plain, baseSpec())

	r := mustGrab(t, grabCall("r1", "p1", "ip", GrabItem{Key: plain, Num: 1}, GrabItem{Key: key, Num: 2}))
	want := []Envelope{{}, {Amount: 40, Parts: []int{0, 1}}}
	if r.Code != CodeOK || !reflect.DeepEqual(r.Envelopes, want) || !reflect.DeepEqual(r.Remaining, []int64{9, 3}) {
		t.Fatalf("grab: %+v, want envelopes %+v", r, want)
	}
	e, _ := ledger(t, key, "r1")
	if env, err := e.Envelope(); err != nil || e.Amount != 40 || e.Parts != "0:30,1:10" || !reflect.DeepEqual(env, want[1]) {
		t.Fatalf("ledger entry %+v (%+v, %v)", e, env, err)
	}
	if pe, _ := ledger(t, plain, "r1"); pe.Amount != 0 || pe.Parts != "" {
		t.Fatalf("the ordinary item's entry has a pool's take: %+v", pe)
	}
	if h := mustHash(t, key); h.EnvLeft != 60 || h.Remaining != 3 {
		t.Fatalf("after the take: %+v", h)
	}

	// A call of no pool item answers no envelopes at all.
	if r := mustGrab(t, grabCall("r2", "p2", "ip2", GrabItem{Key: plain, Num: 1})); r.Code != CodeOK || r.Envelopes != nil {
		t.Fatalf("plain grab: %+v", r)
	}
	// A replay answers what the entries hold, item by item.
	r = mustGrab(t, grabCall("r1", "p1", "ip", GrabItem{Key: plain, Num: 1}, GrabItem{Key: key, Num: 2}))
	if r.Code != CodeDuplicate || !reflect.DeepEqual(r.Envelopes, want) {
		t.Fatalf("replay: %+v", r)
	}
	if r := mustGrab(t, grabCall("r2", "p2", "ip2", GrabItem{Key: plain, Num: 1})); r.Code != CodeDuplicate || r.Envelopes != nil {
		t.Fatalf("replay of a plain grab: %+v", r)
	}
	// The rest goes; then the pool is sold out, whatever remaining says.
	if r := mustGrab(t, grabCall("r3", "p3", "ip3", GrabItem{Key: key, Num: 3})); r.Code != CodeOK || r.Envelopes[0].Amount != 60 {
		t.Fatalf("the last three: %+v", r)
	}
	if r := mustGrab(t, grabCall("r4", "p4", "ip4", GrabItem{Key: key, Num: 1})); r.Code != CodeSoldOut {
		t.Fatalf("an empty pool: %+v", r)
	}
	if h := mustHash(t, key); h.EnvLeft != 0 || h.Remaining != 0 || len(poolLeft(t, key)) != 0 {
		t.Fatalf("after the last: %+v", h)
	}
	rdb.HSet(ctx, key, "remaining", 1) // a remaining out of step with the pool hands out nothing
	if r := mustGrab(t, grabCall("r5", "p5", "ip5", GrabItem{Key: key, Num: 1})); r.Code != CodeSoldOut || r.Left != 0 {
		t.Fatalf("remaining 1 over an empty pool: %+v", r)
	}
}

// A refusal of any item takes nothing from the pool: the check phase decides before
// a part moves.
func TestARefusedGrabTakesNoPart(t *testing.T) {
	key, limited := promoKey(t, "pool"), promoKey(t, "limited")
	mustCreate(t, key, poolSpec())
	s := baseSpec()
	s.PerPin = 1
	mustCreate(t, limited, s)
	mustGrab(t, grabCall("r0", "p1", "ip", GrabItem{Key: limited, Num: 1}))
	if r := mustGrab(t, grabCall("r1", "p1", "ip", GrabItem{Key: key, Num: 2}, GrabItem{Key: limited, Num: 1})); r.Code != CodePinLimit || r.Index != 1 {
		t.Fatalf("grab: %+v", r)
	}
	if got := poolLeft(t, key); !reflect.DeepEqual(got, members(0, 1, 2, 3, 4)) || mustHash(t, key).EnvLeft != 100 {
		t.Fatalf("a refused grab moved parts: %v", got)
	}
}

// Every return mode that gives stock back puts exactly the entry's parts back at
// their own indexes (so they are the next drawn), restores envLeft and answers
// what it gave back; finalize and a refused return move nothing.
func TestReturnsPutTheEntrysPartsBack(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		setup func(key string) // r1 took parts 0 and 1; setup brings its entry to the state the mode needs
		mode  ReturnMode
	}{
		{"undo", func(string) {}, ReturnUndo},
		{"abort", func(string) {}, ReturnAbort},
		{"cancel", func(key string) { mustCommit(t, "r1", key) }, ReturnCancel},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := promoKey(t, "pool")
			mustCreate(t, key, poolSpec())
			mustGrab(t, grabCall("r1", "p1", "ip", GrabItem{Key: key, Num: 2}))
			mustGrab(t, grabCall("r2", "p2", "ip2", GrabItem{Key: key, Num: 1}))
			c.setup(key)
			r, err := Return(ctx, rdb, ReturnCall{RequestID: "r1", Pin: "p1", Mode: c.mode, NowMs: now, Reason: cancelReason, Keys: []string{key}})
			want := []Envelope{{Amount: 40, Parts: []int{0, 1}}}
			if err != nil || r.Code != ReturnReturned || !reflect.DeepEqual(r.Envelopes, want) {
				t.Fatalf("return: %+v %v", r, err)
			}
			if got := poolLeft(t, key); !reflect.DeepEqual(got, members(0, 1, 3, 4)) {
				t.Fatalf("pool after the return: %v", got)
			}
			if h := mustHash(t, key); h.EnvLeft != 75 || h.Remaining != 4 {
				t.Fatalf("hash after the return: %+v", h)
			}
			// Returned again: nothing moves twice.
			r, err = Return(ctx, rdb, ReturnCall{RequestID: "r1", Pin: "p1", Mode: c.mode, NowMs: now, Reason: cancelReason, Keys: []string{key}})
			if err != nil || (r.Code != ReturnAlreadyReturned && c.mode != ReturnUndo) || r.Envelopes != nil || mustHash(t, key).EnvLeft != 75 {
				t.Fatalf("second return: %+v %v", r, err)
			}
			// The parts given back are the next handed out.
			if g := mustGrab(t, grabCall("r3", "p3", "ip3", GrabItem{Key: key, Num: 2})); !reflect.DeepEqual(g.Envelopes, want) {
				t.Fatalf("the next grab drew %+v, want the returned parts", g.Envelopes)
			}
		})
	}
}

func TestFinalizeAndRefusedReturnsMoveNoPart(t *testing.T) {
	ctx := context.Background()
	key := promoKey(t, "pool")
	mustCreate(t, key, poolSpec())
	mustGrab(t, grabCall("r1", "p1", "ip", GrabItem{Key: key, Num: 2}))
	ret := func(mode ReturnMode, pin string) ReturnReply {
		r, err := Return(ctx, rdb, ReturnCall{RequestID: "r1", Pin: pin, Mode: mode, NowMs: now, Reason: cancelReason, Keys: []string{key}})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := ret(ReturnCancel, "p1"); r.Code != ReturnPending || r.Envelopes != nil {
		t.Fatalf("cancel of a pending take: %+v", r)
	}
	mustCommit(t, "r1", key)
	if r := ret(ReturnCancel, "someone-else"); r.Code != ReturnNotFound {
		t.Fatalf("another pin's cancel: %+v", r)
	}
	if r := ret(ReturnAbort, ""); r.Code != ReturnCommitted {
		t.Fatalf("abort of a committed take: %+v", r)
	}
	if got := poolLeft(t, key); !reflect.DeepEqual(got, members(2, 3, 4)) {
		t.Fatalf("a refused return moved parts: %v", got)
	}
	ret(ReturnCancel, "p1")
	if r := ret(ReturnFinalize, ""); r.Code != ReturnReturned || r.Envelopes != nil {
		t.Fatalf("finalize: %+v", r)
	}
	if got := poolLeft(t, key); !reflect.DeepEqual(got, members(0, 1, 2, 3, 4)) || mustHash(t, key).EnvLeft != 100 {
		t.Fatalf("finalize moved parts: %v", got)
	}
}

// A promotion deleted while a take is open: the pool went with the hash, and a
// later return puts nothing back into a pool that no longer exists, but says what
// the take held.
func TestDeleteDropsThePoolAndALateReturnLeavesItGone(t *testing.T) {
	ctx := context.Background()
	key := promoKey(t, "pool")
	mustCreate(t, key, poolSpec())
	mustGrab(t, grabCall("r1", "p1", "ip", GrabItem{Key: key, Num: 2}))
	if r, err := Delete(ctx, rdb, onShard, key, 2, now); err != nil || r.Code != AdminOK {
		t.Fatalf("delete: %+v %v", r, err)
	}
	if rdb.Exists(ctx, promo.EnvelopeKey(key)).Val() != 0 {
		t.Fatal("the pool outlived its promotion")
	}
	r, err := Return(ctx, rdb, ReturnCall{RequestID: "r1", Mode: ReturnAbort, NowMs: now, Keys: []string{key}})
	// The answer still names the envelopes (the CANCEL nets them out of the record).
	want := []Envelope{{Amount: 40, Parts: []int{0, 1}}}
	if err != nil || r.Code != ReturnReturned || !reflect.DeepEqual(r.Envelopes, want) || rdb.Exists(ctx, promo.EnvelopeKey(key), key).Val() != 0 {
		t.Fatalf("abort after the delete: %+v %v", r, err)
	}
}

func TestEnvelopeMemberRoundTrips(t *testing.T) {
	for _, m := range []string{"0:1", "99999:1000000000000"} {
		i, a, err := ParseEnvelopeMember(m)
		if err != nil || EnvelopeMember(i, a) != m {
			t.Errorf("%q: %d %d %v", m, i, a, err)
		}
	}
	for _, m := range []string{"", "1", ":1", "1:", "-1:2", "1:-2", "a:b", "1:2:3"} {
		if _, _, err := ParseEnvelopeMember(m); err == nil {
			t.Errorf("%q parsed", m)
		}
	}
	if got := EnvelopeParts([]int{2, 0}, poolParts); got != "2:25,0:30" {
		t.Errorf("EnvelopeParts: %q", got)
	}
}
