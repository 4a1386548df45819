package rebuild_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/recovery/internal/rebuild"
	rt "github.com/flashsale/platform/recovery/internal/recoverytest"
)

// Buyers from three addresses of one IPv6 /64 are one ip to the per-ip limit; the
// rebuild recomputes that count from the record's full addresses (promo.IPKey), and
// the ledger's ip key with it, so a return after the rebuild releases the /64.
func TestRebuildCountsAnIPv6BuyerByItsPrefix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, "sink-ipv6", nil)
	suffix := testenv.Suffix()
	key := rt.Create(t, w.db.Promotions, w.shards, rt.Spec{PromoID: rt.IDOnShard("v6-"+suffix, lostShard), Total: 10, PerIP: 3})
	s := rt.NewSale(w.shards, w.brokers)
	defer s.Close()

	addrs := []string{"2001:db8:6:1::1", "2001:db8:6:1::2", "2001:db8:6:1:ffff::3", "2001:db8:6:1::4"}
	for i, ip := range addrs {
		ok, code, err := s.Grab(ctx, "v6-"+suffix+"-"+string(rune('a'+i)), "pin-v6-"+string(rune('a'+i)), ip, key, 1)
		if err != nil || ok != (i < 3) {
			t.Fatalf("grab %d from %s: granted %v (%v, %v); want the fourth refused", i, ip, ok, code, err)
		}
	}
	if ok, err := s.Cancel(ctx, "v6-"+suffix+"-a", "pin-v6-a", addrs[0], key, 1, "PAYMENT_EXPIRED"); err != nil || !ok {
		t.Fatalf("cancel: %v %v", ok, err)
	}
	before := rt.Take(t, w.shards[lostShard], key)
	if before.IPs["2001:db8:6:1::/64"] != "2" || len(before.IPs) != 1 {
		t.Fatalf("ip counters %v; want the /64 holding 2", before.IPs)
	}
	w.own.Kill()
	w.own.Start()
	if _, err := rebuild.Run(ctx, w.deps, options(lostShard)); err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if after := rt.Take(t, w.shards[lostShard], key); !reflect.DeepEqual(before, after) {
		t.Fatalf("rebuilt differs:\nbefore %+v\nafter  %+v", before, after)
	}
	if ok, err := s.Cancel(ctx, "v6-"+suffix+"-b", "pin-v6-b", addrs[1], key, 1, "PAYMENT_EXPIRED"); err != nil || !ok {
		t.Fatalf("cancel after the rebuild: %v %v", ok, err)
	}
	if got := rt.Take(t, w.shards[lostShard], key).IPs; got["2001:db8:6:1::/64"] != "1" {
		t.Fatalf("ip counters after a cancel of a rebuilt take %v; want the /64 holding 1", got)
	}
}
