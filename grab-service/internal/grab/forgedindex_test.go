package grab

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/grab-service/internal/grabtest"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/testenv"
)

// A request index entry is read back from a shard, where anyone who can write the
// shard could have put it: one naming a bucket past its promotion's buckets, or a
// shard that does not exist, is no entry of ours. A cancel of it answers not found
// and a confirm too; before the entries were checked, such an entry reached the
// bucket layout with an index past its end.
func TestAForgedIndexEntryIsNoneOfOurs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.StartRedis(t, testenv.Volatile)
	c := srv.Client()
	svc, err := New(Defaults(), Deps{Shards: testenv.OneServer(c), Publisher: &grabtest.Publisher{}, Switches: configcenter.NewHolder(),
		Metrics: NewMetrics(prometheus.NewRegistry()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	for name, entry := range map[string]string{
		"bucket past buckets": `{"h":"x","pin":"mallory","ip":"10.0.0.1","items":[{"promoId":"P","type":1,"num":1,"shard":3,"bucket":40,"buckets":8}]}`,
		"shard past 15":       `{"h":"x","pin":"mallory","ip":"10.0.0.1","items":[{"promoId":"P","type":1,"num":1,"shard":99}]}`,
		"ten thousand parts":  `{"h":"x","pin":"mallory","ip":"10.0.0.1","items":[{"promoId":"P","type":1,"num":1,"shard":3,"bucket":1,"buckets":99}]}`,
	} {
		rid := "forged-" + name[:5]
		if err := c.Set(ctx, promo.RequestIndexKey(rid), entry, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Cancel(ctx, rid, "mallory", "USER"); !errors.Is(err, ErrGrabNotFound) {
			t.Errorf("%s: cancel answered %v; want not found", name, err)
		}
	}
}
