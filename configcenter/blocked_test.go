package configcenter

import "testing"

// An IPv6 address banned covers the prefix the per-ip limit counts by (a /64 by
// default), as a buyer holding one address of it holds them all; an IPv4 address
// and a wider IPv6 range are as written.
func TestBlockedIPv6AddressCoversItsPrefix(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`{"blockedIps": ["2001:db8:1:2::1", "10.1.2.3", "2001:db8:9::/48", "2001:db8:5:5:5::/80"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ip   string
		want bool
	}{
		{"2001:db8:1:2::1", true},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", true}, // same /64
		{"2001:db8:1:3::1", false},                 // the next /64
		{"2001:db8:9:ffff::1", true},               // within the /48
		{"2001:db8:5:5:ffff::1", true},             // an /80 covers its /64
		{"2001:db8:5:6::1", false},
		{"10.1.2.3", true},
		{"10.1.2.4", false}, // IPv4 stays one address
	} {
		if got := s.BlockedBuyer("someone", c.ip); got != c.want {
			t.Errorf("BlockedBuyer(%q) = %v, want %v", c.ip, got, c.want)
		}
	}
}
