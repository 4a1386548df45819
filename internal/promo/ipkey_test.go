package promo

import (
	"flag"
	"io"
	"testing"
)

func TestIPKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ip   string
		bits int
		want string
	}{
		{"10.1.2.3", 64, "10.1.2.3"},
		{"::ffff:10.1.2.3", 64, "10.1.2.3"},
		{"2001:db8:1:2:aaaa:bbbb:cccc:dddd", 64, "2001:db8:1:2::/64"},
		{"2001:DB8:1:2::1", 64, "2001:db8:1:2::/64"},
		{"2001:db8:1:2::1", 48, "2001:db8:1::/48"},
		{"2001:db8:1:2::1", 128, "2001:db8:1:2::1"},
		{"2001:db8:1:2::1", 0, "::/0"},
		{"fe80::1%eth0", 64, "fe80::1%eth0"},
		{"not-an-ip", 64, "not-an-ip"},
	} {
		if got := IPKey(c.ip, c.bits); got != c.want {
			t.Errorf("IPKey(%q, %d) = %q, want %q", c.ip, c.bits, got, c.want)
		}
	}
	if IPKey("2001:db8:1:2::1", 64) != IPKey("2001:db8:1:2:ffff::9", 64) {
		t.Error("two addresses of one /64 count apart")
	}
	if IPKey("2001:db8:1:2::1", 64) == IPKey("2001:db8:1:3::1", 64) {
		t.Error("two /64s count together")
	}
}

func TestSetIPv6Prefix(t *testing.T) {
	if IPv6Prefix() != DefaultIPv6Prefix {
		t.Fatalf("default prefix %d", IPv6Prefix())
	}
	for _, bad := range []int{-1, 129} {
		if SetIPv6Prefix(bad) == nil {
			t.Errorf("prefix %d accepted", bad)
		}
	}
	if IPv6Prefix() != DefaultIPv6Prefix {
		t.Fatalf("a refused prefix changed it to %d", IPv6Prefix())
	}
}

func TestIPv6PrefixFlagRefusesOutOfRange(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	IPv6PrefixFlag(fs)
	for _, bad := range []string{"129", "-1", "x"} {
		if fs.Parse([]string{"--ipv6-prefix", bad}) == nil {
			t.Errorf("--ipv6-prefix %s accepted", bad)
		}
	}
	if IPv6Prefix() != DefaultIPv6Prefix {
		t.Fatalf("prefix %d after refused flags", IPv6Prefix())
	}
}

func TestByIPKey(t *testing.T) {
	t.Parallel()
	got := ByIPKey(map[string]int64{"2001:db8::1": 2, "2001:db8::2": 1, "2001:db8:0:1::1": 0, "10.0.0.1": 3})
	want := map[string]int64{"2001:db8::/64": 3, "10.0.0.1": 3}
	if len(got) != len(want) || got["2001:db8::/64"] != 3 || got["10.0.0.1"] != 3 {
		t.Fatalf("ByIPKey = %v, want %v", got, want)
	}
}
