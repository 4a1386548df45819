package adminservice_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/promo-admin/internal/adminservice"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// A promotion in buckets after a failure at any point of a change: bucket 0 says
// whether the change landed, and the repairer brings the other buckets to it.

const k = 4

func createInBuckets(t *testing.T, e *admintest.Env, id string, total int64) {
	t.Helper()
	s := e.Spec(id)
	s["buckets"], s["total"] = k, total
	if r := e.Do(http.MethodPost, "/v1/promotions", admintest.AdminToken, s); r.Status != http.StatusCreated {
		t.Fatalf("create %s in %d buckets: %s", id, k, r)
	}
}

// repair runs the repairer once the pending change is past its grace.
func repair(t *testing.T, e *admintest.Env) {
	t.Helper()
	e.Clock.Advance(grace + time.Second)
	if err := e.App.Admin.Repair(context.Background()); err != nil {
		t.Fatalf("repair: %v", err)
	}
}

// The shard dies once every bucket but 0 holds a create or a PATCH lowering total
// and before bucket 0 does: the change is pending, and the repairer, finding bucket
// 0 without it, undoes it on the other buckets (the create's hashes deleted, the
// patch's taken back to the committed spec and version) before it drops it.
func TestBucketsUndoneWhenBucket0DidNotTakeTheChange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		existed bool
		written string // the buckets' versions when bucket 0 is about to be written (0: none)
		send    func(e *admintest.Env, id string) admintest.Response
	}{
		{"create", false, "0 1 1 1", func(e *admintest.Env, id string) admintest.Response {
			s := e.Spec(id)
			s["buckets"], s["total"] = k, 20
			return e.Do(http.MethodPost, "/v1/promotions", admintest.AdminToken, s)
		}},
		{"lowering patch", true, "1 2 2 2", func(e *admintest.Env, id string) admintest.Response {
			return e.Do(http.MethodPatch, "/v1/promotions/"+id+"/1", admintest.AdminToken, map[string]any{"total": 9})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rs, e := ownShard(t)
			id := "undo-" + testenv.Suffix()
			if c.existed {
				createInBuckets(t, e, id, 20)
			}
			before := e.BucketSnapshot(id, 1, k)
			var once sync.Once
			var written []string
			adminservice.SetFaults(e.App.Admin, func() {
				once.Do(func() {
					hashes, _ := e.Buckets(id, 1, k)
					for _, h := range hashes {
						written = append(written, fmt.Sprint(h.Ver))
					}
					rs.Kill()
				})
			}, nil)
			if r := c.send(e, id); r.Status != http.StatusServiceUnavailable {
				t.Fatalf("with the shard dead before bucket 0: want 503, have %s", r)
			}
			if have := strings.Join(written, " "); have != c.written {
				t.Fatalf("before bucket 0's write the buckets were at versions %s, want %s", have, c.written)
			}
			adminservice.SetFaults(e.App.Admin, nil, nil)
			rs.Start()
			if row, _ := e.Row(id, 1); row.Pending == nil {
				t.Fatal("the change is not pending")
			}
			repair(t, e)
			if after := e.BucketSnapshot(id, 1, k); after != before {
				t.Errorf("the buckets are not back as they were:\nbefore %s\nafter  %s", before, after)
			}
			row, ok := e.Row(id, 1)
			if ok != c.existed || row.Pending != nil || (ok && row.Version != 1) {
				t.Errorf("the change should be dropped: %+v (exists %v)", row, ok)
			}
			e.Agree(id, 1)
		})
	}
}

// Bucket 0 takes a stop, a delete or a PATCH not lowering total, and another
// bucket cannot be reached (its shard is being rebuilt, or the server dies): the
// change stays pending, and the repairer completes it on every bucket.
func TestBucketsCompletedOnceBucket0TookTheChange(t *testing.T) {
	t.Parallel()
	for _, c := range []completeCase{
		{"stop, a bucket fenced", http.MethodPost, "/stop", nil, true},
		{"raising patch, a bucket fenced", http.MethodPatch, "", map[string]any{"total": 30, "perPinLimit": 9}, true},
		{"delete, the server dead", http.MethodDelete, "", nil, false},
		{"raising patch, the server dead", http.MethodPatch, "", map[string]any{"total": 30}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			completeOnceBucket0Took(t, c)
		})
	}
}

// completeCase is a change bucket 0 takes while another bucket is out of reach.
type completeCase struct {
	name, method, suffix string
	body                 any
	fence                bool // fence bucket 2's shard, else kill the server after bucket 0's write
}

func completeOnceBucket0Took(t *testing.T, c completeCase) {
	rs, e := ownShard(t)
	id := "complete-" + testenv.Suffix()
	createInBuckets(t, e, id, 20)
	l := e.Layout(id, 1, k)
	fence := promo.FenceKey(l.Shards[2])
	if c.fence {
		e.Shard(l.Shards[2]).Set(context.Background(), fence, "rebuild", 0)
	} else {
		var once sync.Once
		adminservice.SetFaults(e.App.Admin, nil, func() { once.Do(rs.Kill) })
	}
	r := e.Do(c.method, "/v1/promotions/"+id+"/1"+c.suffix, admintest.AdminToken, c.body)
	want := "redis shard"
	if c.fence {
		want = fmt.Sprintf("redis shard %d", l.Shards[2])
	}
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Error().Message, want) || !strings.Contains(r.Error().Message, "pending") {
		t.Fatalf("with a bucket out of reach: want 503 naming %q, saying the change is pending, have %s", want, r)
	}
	row, _ := e.Row(id, 1)
	if row.Pending == nil {
		t.Fatal("the change is not pending")
	}
	adminservice.SetFaults(e.App.Admin, nil, nil)
	if c.fence {
		e.Shard(l.Shards[2]).Del(context.Background(), fence)
	} else {
		rs.Start()
	}
	hashes, exists := e.Buckets(id, 1, k)
	if c.method == http.MethodDelete {
		if exists[0] || !exists[2] {
			t.Fatalf("want bucket 0 deleted and bucket 2 not, have %v", exists)
		}
	} else if hashes[0].Ver != 2 || hashes[2].Ver != 1 {
		t.Fatalf("want bucket 0 at version 2 and bucket 2 at 1, have %+v", hashes)
	}
	repair(t, e)
	row, _ = e.Row(id, 1)
	if row.Pending != nil || row.Version != 2 {
		t.Errorf("the change should be promoted: %+v", row)
	}
	e.Agree(id, 1)
	if _, exists := e.Buckets(id, 1, k); c.method == http.MethodDelete && slices.Contains(exists, true) {
		t.Errorf("buckets left after the delete was completed: %v", exists)
	}
}

// A grab takes from bucket 0 after a PATCH lowering total found every bucket
// within its new share and wrote the others: bucket 0 refuses, the others are
// taken back (lua.PatchFrom) and the answer is 409 BELOW_GRANTED naming bucket 0.
func TestLoweringPatchRacedByAGrab(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{Service: config()})
	id := "raced-" + testenv.Suffix()
	createInBuckets(t, e, id, 20) // shares 5 5 5 5
	e.Take(id, k, 0, "p1", 1)
	var once sync.Once
	adminservice.SetFaults(e.App.Admin, func() { once.Do(func() { e.Take(id, k, 0, "p2", 2); e.Take(id, k, 0, "p3", 1) }) }, nil)
	// 10 is 3 3 2 2: bucket 0 has granted 1 when checked, 4 when written.
	r := e.Do(http.MethodPatch, "/v1/promotions/"+id+"/1", admintest.AdminToken, map[string]any{"total": 10})
	l := e.Layout(id, 1, k)
	if r.Status != http.StatusConflict || r.Error().Code != "BELOW_GRANTED" || !strings.Contains(r.Error().Message, fmt.Sprintf("bucket 0 of 4 (redis shard %d)", l.Shards[0])) {
		t.Fatalf("raced lowering: want 409 BELOW_GRANTED naming bucket 0, have %s", r)
	}
	adminservice.SetFaults(e.App.Admin, nil, nil)
	if row, _ := e.Row(id, 1); row.Version != 1 || row.Pending != nil || row.Spec.Total != 20 {
		t.Errorf("the row should be as before: %+v", row)
	}
	e.Agree(id, 1)
	hashes, _ := e.Buckets(id, 1, k)
	if have := []int64{hashes[0].Remaining, hashes[1].Remaining, hashes[2].Remaining, hashes[3].Remaining}; !slices.Equal(have, []int64{1, 5, 5, 5}) {
		t.Errorf("remaining by bucket %v, want [1 5 5 5]", have)
	}
}
