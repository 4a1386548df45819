package grabtransport_test

import (
	"fmt"
	"testing"

	"github.com/flashsale/platform/grab-service/internal/grab"
	"github.com/flashsale/platform/internal/bucket"
)

// Addresses of one IPv6 /64 are one ip to a per-ip limit (promo.IPKey): the
// counter is the /64's, a cancel releases it, and another /64 is another ip.
func TestPerIPLimitCountsAnIPv6Slash64AsOneIP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	id := e.promotion("v6limit", spec{total: 50, perIP: 2})
	steps := []struct {
		rid, pin, ip string
		want         grab.Outcome
	}{
		{"v6-1", "p1", "2001:db8:a:b::1", grab.Granted},
		{"v6-2", "p2", "2001:db8:a:b:ffff::2", grab.Granted},
		{"v6-3", "p3", "2001:DB8:A:B::3", grab.IPLimit},
		{"v6-4", "p4", "2001:db8:a:c::1", grab.Granted},
	}
	for _, s := range steps {
		if r := e.grab(grabBody(s.rid, s.pin, s.ip, id, 1)); r.res.Result != s.want {
			t.Fatalf("grab %s from %s: %d %s, want %s", s.rid, s.ip, r.status, r.raw, s.want)
		}
	}
	if n := e.held(id, "ip", "2001:db8:a:b::/64"); n != 2 {
		t.Fatalf("the /64 holds %d, want 2", n)
	}
	if r := e.cancel("v6-1", "p1"); r.res.Result != grab.Returned {
		t.Fatalf("cancel: %d %s", r.status, r.raw)
	}
	if n := e.held(id, "ip", "2001:db8:a:b::/64"); n != 1 {
		t.Fatalf("the /64 holds %d after a cancel, want 1", n)
	}
	if r := e.grab(grabBody("v6-5", "p3", "2001:db8:a:b::3", id, 1)); r.res.Result != grab.Granted {
		t.Fatalf("grab after the cancel: %d %s", r.status, r.raw)
	}
}

// A bucketed promotion counts an IPv6 /64 on one home bucket, the /64's, so its
// per-ip limit holds across buckets for addresses whose own homes differ.
func TestBucketedPerIPLimitCountsAnIPv6Slash64OnItsHome(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const k = 8
	a, b := "2001:db8:b:1::1", ""
	for i := 2; b == ""; i++ {
		if c := fmt.Sprintf("2001:db8:b:1::%x", i); bucket.Home(c, k) != bucket.Home(a, k) {
			b = c // homes apart when each address counted alone
		}
	}
	id, l := e.bucketed("v6buckets", k, spec{total: 80, perIP: 1})
	if r := e.grab(grabBody("v6b-1", "pb1", a, id, 1)); r.res.Result != grab.Granted {
		t.Fatalf("first grab: %d %s", r.status, r.raw)
	}
	if r := e.grab(grabBody("v6b-2", "pb2", b, id, 1)); r.res.Result != grab.IPLimit {
		t.Fatalf("a second address of the /64: %d %s, want IP_LIMIT", r.status, r.raw)
	}
	if _, _, ips := e.buckets(id, l); ips["2001:db8:b:1::/64"] != 1 || len(ips) != 1 {
		t.Fatalf("ip counters over the buckets %v; want the /64 holding 1", ips)
	}
}
