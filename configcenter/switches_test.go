package configcenter

import (
	"fmt"
	"strings"
	"testing"
)

// A document without degradeMaxPerSecond runs with the default cap; a cap outside
// 1..MaxDegradeMaxPerSecond rejects the document whole, naming the field.
func TestParseDegradeMaxPerSecond(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`{"kafkaDegrade": true}`))
	if err != nil || s.DegradeMaxPerSecond != DefaultDegradeMaxPerSecond {
		t.Fatalf("no cap given: %v %v, want the default %d", s, err, DefaultDegradeMaxPerSecond)
	}
	if s, err := Parse([]byte(`{"degradeMaxPerSecond": 50}`)); err != nil || s.DegradeMaxPerSecond != 50 {
		t.Fatalf("cap 50: %v %v", s, err)
	}
	for _, bad := range []string{`0`, `-5`, `0.5`, `100001`, `"200"`, `null`} {
		_, err := Parse([]byte(`{"degradeMaxPerSecond": ` + bad + `}`))
		if bad == "null" { // null leaves the default, as for every field
			if err != nil {
				t.Fatalf("null: %v", err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "degradeMaxPerSecond") {
			t.Fatalf("degradeMaxPerSecond %s: %v, want a rejection naming the field", bad, err)
		}
	}
}

// Blocked buyers: a pin as sent; an address, or any address of a CIDR range, in
// IPv4, IPv6 or IPv4-mapped IPv6 form. A malformed entry rejects the document.
func TestBlockedBuyers(t *testing.T) {
	t.Parallel()
	s, err := Parse([]byte(`{"blockedPins": ["bot-1", "刷单"], "blockedIps": ["10.1.2.3", "10.9.0.0/16", "2001:db8::/32", "::ffff:192.0.2.0/120"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		pin, ip string
		want    bool
	}{
		{"bot-1", "198.51.100.1", true}, {"刷单", "198.51.100.1", true}, {"bot-2", "198.51.100.1", false},
		{"p", "10.1.2.3", true}, {"p", "10.1.2.4", false}, {"p", "::ffff:10.1.2.3", true},
		{"p", "10.9.255.1", true}, {"p", "10.10.0.1", false},
		{"p", "2001:db8:1::7", true}, {"p", "2001:db9::7", false},
		{"p", "192.0.2.77", true}, {"p", "192.0.3.1", false},
	} {
		if got := s.BlockedBuyer(c.pin, c.ip); got != c.want {
			t.Errorf("BlockedBuyer(%q, %q) = %v, want %v", c.pin, c.ip, got, c.want)
		}
	}
	if s, _ := Parse([]byte(`{}`)); s.BlockedBuyer("bot-1", "10.1.2.3") {
		t.Fatal("an empty document blocks a buyer")
	}
	for _, bad := range []string{`{"blockedPins": [""]}`, `{"blockedPins": ["a b"]}`, `{"blockedIps": ["10.1.2"]}`,
		`{"blockedIps": ["10.0.0.0/33"]}`, `{"blockedIps": ["example.com"]}`, `{"blockedIps": ["::ffff:1.2.3.4/64"]}`} {
		if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "blocked") {
			t.Errorf("%s: %v, want a rejection naming the list", bad, err)
		}
	}
}

// blockedDoc is a switches document blocking n pins and n addresses (a tenth of
// them /24 ranges), as a risk feed fills it.
func blockedDoc(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"blockedPins": [`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"bot-%d"`, i)
	}
	b.WriteString(`], "blockedIps": [`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if i%10 == 0 {
			fmt.Fprintf(&b, `"10.%d.%d.0/24"`, 100+i>>16&63, i>>8&255)
		} else {
			fmt.Fprintf(&b, `"172.%d.%d.%d"`, 16+i>>16&15, i>>8&255, i&255)
		}
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// The grab path's cost of the lists: a buyer on none of them, with no lists and
// with 100,000 entries in each (go test -bench BlockedBuyer -run ^$ ./configcenter).
func BenchmarkBlockedBuyer(b *testing.B) {
	for _, n := range []int{0, 100_000} {
		s, err := Parse(blockedDoc(n))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if s.BlockedBuyer("buyer-7", "203.0.113.9") {
					b.Fatal("blocked")
				}
			}
		})
	}
}

// Applying a document of 100,000 pins and 100,000 addresses: what an instance does
// within its second when on-call publishes one (go test -bench ParseBlocked -run ^$ ./configcenter).
func BenchmarkParseBlocked(b *testing.B) {
	doc := blockedDoc(100_000)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := Parse(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// shardAddrs names shards 0..15 by their decimal number and host:port addresses;
// anything else rejects the document whole. Stored, a document runs the hooks.
func TestShardAddrs(t *testing.T) {
	snap, err := Parse([]byte(`{"shardAddrs": {"3": "10.0.0.7:6379", "15": "redis-15b.prod:6380"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.ShardAddrOverrides(); len(got) != 2 || got[3] != "10.0.0.7:6379" || got[15] != "redis-15b.prod:6380" {
		t.Fatalf("overrides %v", got)
	}
	for _, bad := range []string{`{"16": "a:1"}`, `{"-1": "a:1"}`, `{"03": "a:1"}`, `{"x": "a:1"}`, `{"3": ""}`, `{"3": "a"}`,
		`{"3": ":6379"}`, `{"3": "a:0"}`, `{"3": "a:65536"}`, `{"3": "a:port"}`, `{"3": 6379}`} {
		if _, err := Parse([]byte(`{"shardAddrs": ` + bad + `}`)); err == nil || !strings.Contains(err.Error(), "shardAddrs") {
			t.Errorf("shardAddrs %s: %v, want a rejection naming the field", bad, err)
		}
	}
	h := NewHolder()
	var seen []map[int]string
	h.OnStore(func(s *Snapshot) { seen = append(seen, s.ShardAddrOverrides()) })
	h.Store(snap)
	if len(seen) != 2 || seen[0] != nil || seen[1][3] != "10.0.0.7:6379" {
		t.Fatalf("hook saw %v, want the defaults at once, then the document", seen)
	}
}
