package lua

import (
	"context"
	"testing"

	"github.com/flashsale/platform/internal/promo"
)

// A grab that carries its claim writes the request index entry with its take and
// only then: a requestId claimed already answers CLAIMED and changes nothing (not
// even the rate window), and a refused grab leaves no entry behind.
func TestGrabClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := promoKey(t, "a")
	s := baseSpec()
	s.Total, s.RateLimit, s.RateWindowMs = 1, 100, 60_000
	mustCreate(t, key, s)
	claimed := func(rid string) GrabCall {
		c := grabCall(rid, "p-"+rid, "10.0.0.1", item(key, 1))
		c.Claim = &GrabClaim{IndexKey: promo.RequestIndexKey(key + "-" + rid), Entry: []byte(`{"h":"` + rid + `"}`), TTLSeconds: 3600}
		return c
	}

	first := claimed("r1")
	if r := mustGrab(t, first); r.Code != CodeOK {
		t.Fatalf("first grab: %v", r.Code)
	}
	if v, err := rdb.Get(ctx, first.Claim.IndexKey).Result(); err != nil || v != string(first.Claim.Entry) {
		t.Fatalf("the claim after the take: %q %v, want %s", v, err, first.Claim.Entry)
	}
	if ttl := rdb.TTL(ctx, first.Claim.IndexKey).Val().Seconds(); ttl < 3500 || ttl > 3600 {
		t.Errorf("the claim's time to live %.0fs, want about 3600", ttl)
	}

	before := mustHash(t, key)
	if r := mustGrab(t, first); r.Code != CodeClaimed {
		t.Fatalf("a resend that carries its claim again: %v, want CLAIMED", r.Code)
	}
	again := claimed("r2")
	rdb.Set(ctx, again.Claim.IndexKey, "someone else's", 0)
	if r := mustGrab(t, again); r.Code != CodeClaimed {
		t.Fatalf("a requestId claimed by another body: %v, want CLAIMED", r.Code)
	}
	if after := mustHash(t, key); after.Remaining != before.Remaining || after.WinCount != before.WinCount {
		t.Errorf("CLAIMED changed the hash: remaining %d -> %d, window %d -> %d", before.Remaining, after.Remaining, before.WinCount, after.WinCount)
	}
	if _, ok := ledger(t, key, "r2"); ok {
		t.Error("CLAIMED wrote a ledger entry")
	}

	refused := claimed("r3")
	if r := mustGrab(t, refused); r.Code != CodeSoldOut {
		t.Fatalf("a grab of nothing left: %v, want SOLD_OUT", r.Code)
	}
	if n := rdb.Exists(ctx, refused.Claim.IndexKey).Val(); n != 0 {
		t.Error("a refused grab left its claim behind")
	}

	// An index that lost an entry its ledger holds gets it back with the replay.
	rdb.Del(ctx, first.Claim.IndexKey)
	if r := mustGrab(t, first); r.Code != CodeDuplicate {
		t.Fatalf("a replay whose claim was lost: %v, want DUPLICATE", r.Code)
	}
	if n := rdb.Exists(ctx, first.Claim.IndexKey).Val(); n != 1 {
		t.Error("a replay whose claim was lost did not claim again")
	}

	bad := claimed("r4")
	bad.Claim.TTLSeconds = 0
	if _, err := Grab(ctx, rdb, bad); err == nil {
		t.Error("a claim without a time to live was sent")
	}
}
