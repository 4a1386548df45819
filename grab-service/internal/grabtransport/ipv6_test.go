package grabtransport_test

import (
	"testing"

	"github.com/flashsale/platform/grab-service/internal/grab"
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
