package app_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/promostate"
	"github.com/flashsale/platform/internal/promostate/statetest"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// The merchandiser's changes announce themselves on promo-state, from the admin
// scripts' answers: a PATCH to what is granted (SOLD_OUT) and back up (RESTOCKED),
// a stop, a delete; a PATCH that crosses nothing and a second stop say nothing.
func TestAdminChangesAnnounceTheirState(t *testing.T) {
	t.Parallel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, promostate.Topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	e := admintest.Start(t, admintest.Options{KafkaBrokers: cluster.ListenAddrs()})
	suffix := testenv.Suffix()
	a, b := "sa-"+suffix, "sb-"+suffix
	e.Create(a)
	e.Create(b)

	key := promo.Key(a, 1)
	now := time.Now()
	if r, err := lua.Grab(context.Background(), e.Shard(ring.Default.Shard(key)), lua.GrabCall{NowMs: now.UnixMilli(),
		DeadlineMs: now.Add(time.Hour).UnixMilli(), RequestID: "r-" + suffix, BodyHash: "h", Pin: "p", IP: "i",
		RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}}}); err != nil || r.Code != lua.CodeOK {
		t.Fatalf("grab: %+v %v", r, err)
	}
	steps := []struct {
		method, path string
		body         any
	}{
		{http.MethodPatch, path(a), map[string]any{"total": 1}},  // granted 1: SOLD_OUT
		{http.MethodPatch, path(a), map[string]any{"total": 5}},  // RESTOCKED
		{http.MethodPatch, path(a), map[string]any{"total": 50}}, // nothing crosses 0
		{http.MethodPost, path(a) + "/stop", nil},
		{http.MethodPost, path(a) + "/stop", nil}, // already stopped: nothing
		{http.MethodDelete, path(a), nil},
		{http.MethodDelete, path(b), nil},
	}
	for _, st := range steps {
		if r := e.Do(st.method, st.path, admin, st.body); r.Status >= 300 {
			t.Fatalf("%s %s: %s", st.method, st.path, r)
		}
	}
	have := statetest.Events(t, cluster.ListenAddrs(), suffix, 5)
	want := []string{"sa SOLD_OUT", "sa RESTOCKED", "sa STOPPED", "sa DELETED", "sb DELETED"}
	if !slices.Equal(have, want) {
		t.Fatalf("promo-state: %v, want %v", have, want)
	}
}
