package flow

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzFlowJSON holds Event.AppendJSON and RequestIndex.AppendJSON to encoding/json
// byte for byte (HTML escaping off), with no, empty and several items and the
// optional fields present or not, whatever the strings hold.
func FuzzFlowJSON(f *testing.F) {
	for _, s := range []string{"", "r-1", `q"uote\back`, "ctl\x00\x1f", "<&>", "héllo 世界", "bad\xff\xfe", "ls\u2028"} {
		for _, shape := range []uint8{0, 1, 2, 3, 0x1e, 0xff} { // nil, empty, one and two items
			f.Add(s, s, int64(-2), shape)
		}
	}
	f.Fuzz(func(t *testing.T, s, promoID string, n int64, shape uint8) {
		var items []Item
		switch shape & 3 {
		case 1:
			items = []Item{}
		case 2, 3:
			for i := range int(shape&3) - 1 {
				items = append(items, Item{PromoID: promoID, Type: int(n) + i, Num: n * 3, Shard: i})
				if shape&32 != 0 { // of a bucketed promotion; the ip counted nowhere on one
					items[i].Bucket, items[i].Buckets, items[i].NoIP = i, int(n), i == 0
				}
			}
		}
		e := Event{EventID: s, Kind: Kind(promoID), RequestID: s, Pin: promoID, IP: s, Items: items, OccurredAt: s}
		if shape&4 != 0 {
			e.Reason = s
		}
		if shape&8 != 0 {
			e.BodyHash = promoID
			e.Channel = s // the grab's channel (any string: the encoding is what is held here)
		}
		x := RequestIndex{BodyHash: s, Pin: promoID, IP: s, Items: items}
		if shape&16 != 0 { // a held grab's deadline, and its claim's time
			e.HoldUntil, x.HoldUntilMs, x.ClaimedMs = n, n, -n
		}
		for _, c := range []struct {
			v    any
			have []byte
		}{{e, e.AppendJSON(nil)}, {x, x.AppendJSON(nil)}} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(c.v); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(c.have, bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
				t.Fatalf("AppendJSON of %T\n have %s\n want %s", c.v, c.have, want.Bytes())
			}
		}
	})
}

// BenchmarkFlowJSON compares AppendJSON with encoding/json on a one-item grant's
// event and index entry: go test -bench FlowJSON -benchmem ./internal/flow
func BenchmarkFlowJSON(b *testing.B) {
	items := []Item{{PromoID: "b1a2c3-hot-0", Type: 1, Num: 1, Shard: 7}}
	e := Event{EventID: "b1a2c3-000123-GRAB", Kind: Grab, RequestID: "b1a2c3-000123", Pin: "p98765", IP: "198.18.0.77",
		Items: items, OccurredAt: "2026-12-01T16:30:00.123Z", BodyHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
	x := RequestIndex{BodyHash: e.BodyHash, Pin: e.Pin, IP: e.IP, Items: items}
	for _, c := range []struct {
		name string
		enc  func() []byte
	}{
		{"append", func() []byte { return x.AppendJSON(e.AppendJSON(make([]byte, 0, 512))) }},
		{"reflection", func() []byte {
			eb, _ := json.Marshal(e)
			xb, _ := json.Marshal(x)
			return append(eb, xb...)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = c.enc()
			}
		})
	}
}
