package lua

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/redis/go-redis/v9"
)

func specV(ver int64, mod func(s *AdminSpec)) AdminSpec {
	s := baseSpec()
	s.Ver = ver
	if mod != nil {
		mod(&s)
	}
	return s
}

// hashOf is the hash Create writes for s (window empty, remaining = total).
func hashOf(s AdminSpec) HashState {
	return HashState{Total: s.Total, Remaining: s.Total, PerPin: s.PerPin, PerIP: s.PerIP, MaxPerGrab: s.MaxPerGrab,
		RateLimit: s.RateLimit, RateWindowMs: s.RateWindowMs, StartMs: s.StartMs, EndMs: s.EndMs, State: s.State, Ver: s.Ver,
		Buckets: int64(max(s.Buckets, 1))}
}

func TestCreate(t *testing.T) {
	t.Parallel()
	full := specV(3, func(s *AdminSpec) { s.PerPin, s.PerIP, s.RateLimit, s.RateWindowMs = 2, 4, 100, 60_000 })
	cases := []struct {
		name  string
		setup func(t *testing.T, k string)
		spec  AdminSpec
		want  AdminCode
		hash  func(k string) HashState
	}{
		{"creates every field", nil, full, AdminOK, func(string) HashState { return hashOf(full) }},
		{"creates stopped", nil, specV(1, func(s *AdminSpec) { s.State = "STOPPED" }), AdminOK,
			func(string) HashState { return hashOf(specV(1, func(s *AdminSpec) { s.State = "STOPPED" })) }},
		{"leftover companions are emptied", func(t *testing.T, k string) {
			ctx := context.Background()
			rdb.HSet(ctx, promo.PinsKey(k), "p1", 5)
			rdb.HSet(ctx, promo.IPsKey(k), "ip", 5)
			rdb.HSet(ctx, promo.LedgerKey(k), "r1", `{"s":"G"}`)
			rdb.ZAdd(ctx, promo.PendingKey(k), redisZ(1, "r1"))
		}, full, AdminOK, func(string) HashState { return hashOf(full) }},
		{"same version again is ALREADY_APPLIED and keeps the counters", func(t *testing.T, k string) {
			mustCreate(t, k, full)
			mustGrab(t, grabCall("r1", "p1", "ip", item(k, 1)))
		}, full, AdminAlreadyApplied, func(string) HashState {
			h := hashOf(full)
			h.Remaining, h.WinCount, h.WinStart = 9, 1, now
			return h
		}},
		{"another version is EXISTS", func(t *testing.T, k string) { mustCreate(t, k, full) },
			specV(4, func(s *AdminSpec) { s.Total = 99 }), AdminExists, func(string) HashState { return hashOf(full) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := promoKey(t, "k")
			if tc.setup != nil {
				tc.setup(t, k)
			}
			have, err := Create(context.Background(), rdb, onShard, k, tc.spec)
			if err != nil || have != tc.want {
				t.Fatalf("have %v %v, want %v", have, err, tc.want)
			}
			if h := mustHash(t, k); h != tc.hash(k) {
				t.Errorf("hash %+v, want %+v", h, tc.hash(k))
			}
			if tc.want == AdminOK {
				for _, ck := range []string{promo.PinsKey(k), promo.IPsKey(k), promo.LedgerKey(k), promo.PendingKey(k)} {
					if rdb.Exists(context.Background(), ck).Val() != 0 {
						t.Errorf("%s survived create", ck)
					}
				}
			}
		})
	}
}

func TestCreateInvalid(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	bad := map[string]AdminSpec{
		"bad state":        specV(1, func(s *AdminSpec) { s.State = "SOLD_OUT" }),
		"negative total":   specV(1, func(s *AdminSpec) { s.Total = -1 }),
		"zero maxPerGrab":  specV(1, func(s *AdminSpec) { s.MaxPerGrab = 0 }),
		"rate, no window":  specV(1, func(s *AdminSpec) { s.RateLimit = 5 }),
		"negative version": specV(-1, nil),
	}
	for name, s := range bad {
		if _, err := Create(context.Background(), rdb, onShard, k, s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := Create(context.Background(), rdb, onShard, "", baseSpec()); err == nil {
		t.Error("empty key accepted")
	}
	if rdb.Exists(context.Background(), k).Val() != 0 {
		t.Error("an invalid create wrote the hash")
	}
}

func TestPatch(t *testing.T) {
	t.Parallel()
	v1 := specV(1, func(s *AdminSpec) { s.RateLimit, s.RateWindowMs = 100, 1000 })
	// grabbed4 creates v1 and grabs 4 units, so granted = 4 and the window counts 1.
	grabbed4 := func(t *testing.T, k string) {
		mustCreate(t, k, v1)
		mustGrab(t, grabCall("r1", "p1", "ip", item(k, 4)))
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, k string)
		spec  AdminSpec
		want  AdminReply
		hash  HashState // checked unless want is NOT_FOUND
	}{
		{"missing is NOT_FOUND", nil, specV(2, nil), AdminReply{Code: AdminNotFound}, HashState{}},
		{"same version is ALREADY_APPLIED", grabbed4, specV(1, func(s *AdminSpec) { s.Total = 50 }),
			AdminReply{Code: AdminAlreadyApplied, Remaining: 6, Granted: 4},
			func() HashState { h := hashOf(v1); h.Remaining, h.WinCount, h.WinStart = 6, 1, now; return h }()},
		{"older version is STALE", func(t *testing.T, k string) { mustCreate(t, k, specV(3, nil)) },
			specV(2, func(s *AdminSpec) { s.Total = 50 }), AdminReply{Code: AdminStale}, hashOf(specV(3, nil))},
		{"stopped is STOPPED", func(t *testing.T, k string) {
			mustCreate(t, k, v1)
			if code, err := stopCode(context.Background(), rdb, onShard, k, 2); err != nil || code != AdminOK {
				t.Fatal(code, err)
			}
		}, specV(3, func(s *AdminSpec) { s.Total = 50 }), AdminReply{Code: AdminStopped},
			func() HashState { h := hashOf(v1); h.State, h.Ver = "STOPPED", 2; return h }()},
		{"below granted is refused", grabbed4, specV(2, func(s *AdminSpec) { s.Total = 3 }),
			AdminReply{Code: AdminBelowGranted, Granted: 4},
			func() HashState { h := hashOf(v1); h.Remaining, h.WinCount, h.WinStart = 6, 1, now; return h }()},
		{"down to exactly granted leaves nothing", grabbed4,
			specV(2, func(s *AdminSpec) { s.Total, s.RateLimit, s.RateWindowMs = 4, 100, 1000 }),
			AdminReply{Code: AdminOK, Remaining: 0, Granted: 4},
			func() HashState {
				h := hashOf(v1)
				h.Ver, h.Total, h.Remaining, h.WinCount, h.WinStart = 2, 4, 0, 1, now
				return h
			}()},
		{"more stock and new limits; same rate keeps the window", grabbed4,
			specV(2, func(s *AdminSpec) {
				s.Total, s.PerPin, s.PerIP, s.MaxPerGrab, s.RateLimit, s.RateWindowMs, s.EndMs = 30, 7, 9, 3, 100, 1000, now+1
			}),
			AdminReply{Code: AdminOK, Remaining: 26, Granted: 4},
			HashState{Total: 30, Remaining: 26, PerPin: 7, PerIP: 9, MaxPerGrab: 3, RateLimit: 100, RateWindowMs: 1000,
				WinCount: 1, WinStart: now, StartMs: v1.StartMs, EndMs: now + 1, State: "ACTIVE", Ver: 2, Buckets: 1}},
		{"a new rate limit restarts the window", grabbed4,
			specV(2, func(s *AdminSpec) { s.RateLimit, s.RateWindowMs = 50, 1000 }),
			AdminReply{Code: AdminOK, Remaining: 6, Granted: 4},
			func() HashState { h := hashOf(v1); h.Ver, h.Remaining, h.RateLimit = 2, 6, 50; return h }()},
		{"a new window restarts the window", grabbed4,
			specV(2, func(s *AdminSpec) { s.RateLimit, s.RateWindowMs = 100, 2000 }),
			AdminReply{Code: AdminOK, Remaining: 6, Granted: 4},
			func() HashState { h := hashOf(v1); h.Ver, h.Remaining, h.RateWindowMs = 2, 6, 2000; return h }()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := promoKey(t, "k")
			if tc.setup != nil {
				tc.setup(t, k)
			}
			have, err := patchNow(context.Background(), rdb, onShard, k, tc.spec)
			// TestStateChanges tells which patches announce a change
			if err != nil || have.Code != tc.want.Code || have.Remaining != tc.want.Remaining || have.Granted != tc.want.Granted {
				t.Fatalf("have %+v %v, want %+v", have, err, tc.want)
			}
			if tc.want.Code == AdminNotFound {
				if rdb.Exists(context.Background(), k).Val() != 0 {
					t.Error("patch created the hash")
				}
				return
			}
			if h := mustHash(t, k); h != tc.hash {
				t.Errorf("hash %+v\nwant %+v", h, tc.hash)
			}
		})
	}
}

// After patching total down to what is granted, the next grab is SOLD_OUT.
func TestPatchDownThenSoldOut(t *testing.T) {
	t.Parallel()
	k := promoKey(t, "k")
	mustCreate(t, k, baseSpec())
	mustGrab(t, grabCall("r1", "p1", "ip", item(k, 2)))
	if r, err := patchNow(context.Background(), rdb, onShard, k, specV(2, func(s *AdminSpec) { s.Total = 2 })); err != nil || r.Code != AdminOK {
		t.Fatal(r, err)
	}
	if r := mustGrab(t, grabCall("r2", "p2", "ip2", item(k, 1))); r.Code != CodeSoldOut {
		t.Fatalf("have %+v", r)
	}
	// A return after the patch puts the unit back within the new total.
	mustReturn(t, retCall(ReturnAbort, k), ReturnReturned)
	if h := mustHash(t, k); h.Remaining != 2 || h.Granted() != 0 {
		t.Fatalf("hash %+v", h)
	}
}

func TestStop(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		setup     func(t *testing.T, k string)
		ver       int64
		want      AdminCode
		wantState string
		wantVer   int64
	}{
		{"missing is NOT_FOUND", nil, 2, AdminNotFound, "", 0},
		{"stops", func(t *testing.T, k string) { mustCreate(t, k, specV(1, nil)) }, 2, AdminOK, "STOPPED", 2},
		{"same version as the hash stops", func(t *testing.T, k string) { mustCreate(t, k, specV(2, nil)) }, 2, AdminOK, "STOPPED", 2},
		{"again is still OK", func(t *testing.T, k string) {
			mustCreate(t, k, specV(1, nil))
			if c, err := stopCode(context.Background(), rdb, onShard, k, 2); err != nil || c != AdminOK {
				t.Fatal(c, err)
			}
		}, 2, AdminOK, "STOPPED", 2},
		{"older version is STALE", func(t *testing.T, k string) { mustCreate(t, k, specV(3, nil)) }, 2, AdminStale, "ACTIVE", 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := promoKey(t, "k")
			if tc.setup != nil {
				tc.setup(t, k)
			}
			have, err := stopCode(context.Background(), rdb, onShard, k, tc.ver)
			if err != nil || have != tc.want {
				t.Fatalf("have %v %v, want %v", have, err, tc.want)
			}
			h, found, err := ReadHash(context.Background(), rdb, k)
			if err != nil || found != (tc.wantState != "") || h.State != tc.wantState || h.Ver != tc.wantVer {
				t.Fatalf("hash %+v found=%v err=%v", h, found, err)
			}
			if tc.wantState == "STOPPED" {
				if r := mustGrab(t, grabCall("r9", "p9", "ip9", item(k, 1))); r.Code != CodeStopped {
					t.Fatalf("grab after stop: %+v", r)
				}
			}
		})
	}
	if _, err := stopCode(context.Background(), rdb, onShard, "", 1); err == nil {
		t.Error("empty key accepted")
	}
}

func TestDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(t *testing.T, k string)
		want  AdminCode
	}{
		{"deletes the hash, a settled and an open take kept for a day", func(t *testing.T, k string) {
			mustCreate(t, k, baseSpec())
			mustGrab(t, grabCall("r1", "p1", "ip", item(k, 1)))
			if code, err := Commit(ctx, rdb, "r1", []string{k}); err != nil || code != CommitCommitted {
				t.Fatalf("commit: %v %v", code, err)
			}
			mustGrab(t, grabCall("r2", "p2", "ip2", item(k, 1))) // pending: its grab in flight
		}, AdminOK},
		{"missing hash is NOT_FOUND, the rest done all the same", func(t *testing.T, k string) {
			mustCreate(t, k, baseSpec())
			mustGrab(t, grabCall("r1", "p1", "ip", item(k, 1)))
			mustGrab(t, grabCall("r2", "p2", "ip2", item(k, 1)))
			rdb.Del(ctx, k)
		}, AdminNotFound},
		{"nothing at all is NOT_FOUND", nil, AdminNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := promoKey(t, "k")
			if tc.setup != nil {
				tc.setup(t, k)
			}
			have, err := deleteCode(ctx, rdb, onShard, k, 2)
			if err != nil || have != tc.want {
				t.Fatalf("have %v %v, want %v", have, err, tc.want)
			}
			ks := promo.Keys(k)
			if n := rdb.Exists(ctx, ks[0], ks[1], ks[2]).Val(); n != 0 {
				t.Fatalf("%d of the hash, pins and ips survived", n)
			}
			if tc.setup == nil {
				return
			}
			// The ledger and pending set expire a day later. Until then grabs find no
			// promotion, the first take still answers what it was (another take of
			// its request may follow it), and the open one is settled by its entry.
			for _, key := range []string{ks[3], ks[4]} {
				if ttl := rdb.PTTL(ctx, key).Val(); ttl <= DeletedLedgerKeep-time.Minute || ttl > DeletedLedgerKeep {
					t.Errorf("%s: ttl %v, want about %v", key, ttl, DeletedLedgerKeep)
				}
			}
			if r := mustGrab(t, grabCall("r3", "p3", "ip3", item(k, 1))); r.Code != CodeNotFound {
				t.Errorf("a grab after the delete: %+v, want NOT_FOUND", r)
			}
			if e, found, err := ReadLedger(ctx, rdb, k, "r1"); err != nil || !found {
				t.Errorf("the first take: %+v %v %v, want its entry kept", e, found, err)
			}
			r, err := Return(ctx, rdb, ReturnCall{RequestID: "r2", Pin: "p2", Mode: ReturnAbort, NowMs: 1, Keys: []string{k}})
			if err != nil || r.Code != ReturnReturned {
				t.Fatalf("abort of the open take: %+v %v", r, err)
			}
			if rdb.Exists(ctx, k).Val() != 0 {
				t.Error("giving the take back brought the deleted hash back")
			}
			if ttl := rdb.PTTL(ctx, ks[3]).Val(); ttl <= 0 {
				t.Errorf("the ledger lost its expiry when the take was given back: ttl %v", ttl)
			}
		})
	}
	if _, err := deleteCode(ctx, rdb, onShard, "", 1); err == nil {
		t.Error("empty key accepted")
	}
}

// TestAdminScriptsRefuseAFencedShard: while a rebuild fences the shard, every admin
// script answers FENCED and changes nothing (the rebuild would overwrite the change
// with the record it read); once the fence is lifted they work again.
func TestAdminScriptsRefuseAFencedShard(t *testing.T) {
	ctx := context.Background()
	const fenced = 7 // a shard no other test names
	k := promoKey(t, "fenced")
	if code, err := Create(ctx, rdb, fenced, k, baseSpec()); err != nil || code != AdminOK {
		t.Fatalf("create before the fence: %v %v", code, err)
	}
	before := mustHash(t, k)
	rdb.Set(ctx, promo.FenceKey(fenced), "rebuild", 0)
	fresh := promoKey(t, "fresh")
	calls := []struct {
		name string
		call func() (AdminCode, error)
	}{
		{"create", func() (AdminCode, error) { return Create(ctx, rdb, fenced, fresh, baseSpec()) }},
		{"patch", func() (AdminCode, error) {
			r, err := patchNow(ctx, rdb, fenced, k, specV(2, func(s *AdminSpec) { s.Total = 99 }))
			return r.Code, err
		}},
		{"stop", func() (AdminCode, error) { return stopCode(ctx, rdb, fenced, k, 2) }},
		{"delete", func() (AdminCode, error) { return deleteCode(ctx, rdb, fenced, k, 2) }},
	}
	for _, c := range calls {
		if code, err := c.call(); err != nil || code != AdminFenced {
			t.Errorf("%s on a fenced shard: %v %v, want FENCED", c.name, code, err)
		}
	}
	if h := mustHash(t, k); h != before {
		t.Errorf("the hash changed while fenced:\n got %+v\nwant %+v", h, before)
	}
	if rdb.Exists(ctx, fresh).Val() != 0 {
		t.Error("create wrote a hash while fenced")
	}
	// Another shard's fence is not this shard's business.
	if code, err := stopCode(ctx, rdb, fenced+1, k, 2); err != nil || code != AdminOK {
		t.Errorf("stop naming an unfenced shard: %v %v, want OK", code, err)
	}
	rdb.Del(ctx, promo.FenceKey(fenced))
	if code, err := deleteCode(ctx, rdb, fenced, k, 3); err != nil || code != AdminOK {
		t.Errorf("delete after the fence is lifted: %v %v, want OK", code, err)
	}
}

// stopCode, deleteCode and patchNow run Stop, Delete and Patch at the wall
// clock's time; the first two answer the code alone.
func stopCode(ctx context.Context, c redis.Scripter, shard int, key string, ver int64) (AdminCode, error) {
	r, err := Stop(ctx, c, shard, key, ver, time.Now().UnixMilli())
	return r.Code, err
}

func deleteCode(ctx context.Context, c redis.Scripter, shard int, key string, ver int64) (AdminCode, error) {
	r, err := Delete(ctx, c, shard, key, ver, time.Now().UnixMilli())
	return r.Code, err
}

func patchNow(ctx context.Context, c redis.Scripter, shard int, key string, s AdminSpec) (AdminReply, error) {
	return Patch(ctx, c, shard, key, s, time.Now().UnixMilli())
}

// TestPatchFrom: with fromVer the patch is a compare-and-set on the hash's version,
// which may set it lower (the undo of a change of a promotion in buckets).
func TestPatchFrom(t *testing.T) {
	t.Parallel()
	v1 := specV(1, func(s *AdminSpec) { s.RateLimit, s.RateWindowMs = 100, 1000 })
	v2 := specV(2, func(s *AdminSpec) { s.Total, s.RateLimit, s.RateWindowMs = 6, 100, 1000 })
	// atV2 creates v1, grabs 4 units and patches to v2 (total 6), as a lowering patch
	// of a bucket would before its undo.
	atV2 := func(t *testing.T, k string) {
		mustCreate(t, k, v1)
		mustGrab(t, grabCall("r1", "p1", "ip", item(k, 4)))
		if r, err := patchNow(context.Background(), rdb, onShard, k, v2); err != nil || r.Code != AdminOK {
			t.Fatal(r, err)
		}
	}
	atV2Hash := func() HashState {
		h := hashOf(v2)
		h.Remaining, h.WinCount, h.WinStart = 2, 1, now
		return h
	}()
	cases := []struct {
		name    string
		setup   func(t *testing.T, k string)
		spec    AdminSpec
		fromVer int64
		want    AdminReply
		hash    HashState // checked unless want is NOT_FOUND
	}{
		{"at fromVer: back to the older spec and version", atV2, v1, 2,
			AdminReply{Code: AdminOK, Remaining: 6, Granted: 4},
			func() HashState { h := hashOf(v1); h.Remaining, h.WinCount, h.WinStart = 6, 1, now; return h }()},
		{"already at the target version is ALREADY_APPLIED", atV2, v2, 1,
			AdminReply{Code: AdminAlreadyApplied, Remaining: 2, Granted: 4}, atV2Hash},
		{"at neither version is STALE", atV2, specV(0, nil), 1, AdminReply{Code: AdminStale}, atV2Hash},
		{"at a version below fromVer is STALE", atV2, v1, 3, AdminReply{Code: AdminStale}, atV2Hash},
		{"the undo still keeps what is granted", atV2, specV(1, func(s *AdminSpec) { s.Total, s.RateLimit, s.RateWindowMs = 3, 100, 1000 }), 2,
			AdminReply{Code: AdminBelowGranted, Granted: 4}, atV2Hash},
		{"missing is NOT_FOUND", nil, v1, 2, AdminReply{Code: AdminNotFound}, HashState{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := promoKey(t, "k")
			if tc.setup != nil {
				tc.setup(t, k)
			}
			have, err := PatchFrom(context.Background(), rdb, onShard, k, tc.spec, tc.fromVer, time.Now().UnixMilli())
			if err != nil || have.Code != tc.want.Code || have.Remaining != tc.want.Remaining || have.Granted != tc.want.Granted {
				t.Fatalf("have %+v %v, want %+v", have, err, tc.want)
			}
			if tc.want.Code == AdminNotFound {
				if rdb.Exists(context.Background(), k).Val() != 0 {
					t.Error("patch created the hash")
				}
				return
			}
			if h := mustHash(t, k); h != tc.hash {
				t.Errorf("hash %+v\nwant %+v", h, tc.hash)
			}
		})
	}
	if _, err := PatchFrom(context.Background(), rdb, onShard, promoKey(t, "neg"), v1, -1, now); err == nil {
		t.Error("a negative fromVer was accepted")
	}
}

// TestPatchOfABucket: the hashes of a promotion in buckets announce a patch
// crossing 0 of their own stock, and the reopening of an ENDED sale, only as
// BUCKET_FILLED and BUCKET_EMPTY under their own key, and every bucket forgets
// that its sale ended all the same.
func TestPatchOfABucket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	base := promoKey(t, "b")
	for _, k := range []string{base, promo.BucketKey(base, 1)} {
		t.Run(k, func(t *testing.T) {
			s := specV(1, func(s *AdminSpec) { s.Total, s.Buckets = 2, 3 })
			mustCreate(t, k, s)
			mustGrab(t, grabCall("r1", "p1", "ip", GrabItem{Key: k, Num: 2, Part: "spi", Buckets: 3}))
			step := func(name string, ver, total, endMs, at int64, want ...string) {
				t.Helper()
				s.Ver, s.Total, s.EndMs = ver, total, endMs
				r, err := Patch(ctx, rdb, onShard, k, s, at)
				if err != nil || r.Code != AdminOK {
					t.Fatalf("%s: %+v %v", name, r, err)
				}
				wantStates(t, name, changesOf(t, k, r.Changes), want...)
			}
			step("up from 0", 2, 3, s.EndMs, now, StateBucketFilled)
			step("down to 0", 3, 2, s.EndMs, now, StateBucketEmpty)
			// The sale ends (a grab at its end marks the hash), then a patch reopens it.
			if r := mustGrab(t, GrabCall{NowMs: s.EndMs, DeadlineMs: s.EndMs + 5000, RequestID: "late", BodyHash: "h", Pin: "p", IP: "i",
				RateFactorPermille: 1000, Items: []GrabItem{{Key: k, Num: 1, Part: "spi", Buckets: 3}}}); r.Code != CodeEnded {
				t.Fatalf("grab at the end: %+v", r)
			}
			step("reopened", 4, 2, s.EndMs+3_600_000, s.EndMs+1, StateBucketEmpty) // its stock is a share: bucket 0 decides
			if ended, _ := rdb.HExists(ctx, k, "ended").Result(); ended {
				t.Error("the reopened bucket still says its sale ended")
			}
		})
	}
}
