package grabtransport

import (
	"net/netip"
	"testing"
)

// canonicalIP is the address's unmapped text, whether it reuses the text given
// or makes its own.
func TestCanonicalIPIsTheUnmappedText(t *testing.T) {
	for _, text := range []string{"198.18.0.7", "::ffff:198.18.0.7", "2001:DB8::1", "2001:db8::1",
		"2001:0db8:0000:0000:0000:0000:0000:0001", "::1", "0.0.0.0", "::ffff:0:0"} {
		ip := netip.MustParseAddr(text)
		if got, want := canonicalIP(text, ip), ip.Unmap().String(); got != want {
			t.Errorf("%s: %q, want %q", text, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { canonicalIP("198.18.0.7", netip.AddrFrom4([4]byte{198, 18, 0, 7})) }); n != 0 {
		t.Errorf("a canonical IPv4 text allocated %v times", n)
	}
}
