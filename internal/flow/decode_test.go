package flow

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeJSON holds decodeJSON to encoding/json: what it accepts, encoding/json
// accepts too and decodes to the same event.
func FuzzDecodeJSON(f *testing.F) {
	grab := Event{EventID: "9f86d081884c7d659a2feaa0c55ad015", Kind: Grab, RequestID: "r-1", Pin: "alice", IP: "10.0.0.1",
		Items:      []Item{{PromoID: "A", Type: 1, Num: 2, Shard: 14}, {PromoID: "B-2", Type: 3, Num: 1, Shard: 0}},
		OccurredAt: "2026-11-11T12:00:00.000Z", BodyHash: "abc"}
	cancel := Event{EventID: "e2", Kind: Cancel, RequestID: "r-1", Pin: "ünïcode-pin", IP: "::1",
		Items: []Item{{PromoID: "A", Type: 1, Num: 2, Shard: 14}}, OccurredAt: "2026-11-11T12:00:01.000+08:00", Reason: "ROLLBACK"}
	for _, e := range []Event{grab, cancel, {}, {Items: []Item{}}} {
		f.Add(e.AppendJSON(nil))
	}
	for _, s := range []string{
		` { "kind" : "GRAB" , "eventId":"e","items":[ {"num":1,"shard":2,"promoId":"A","type":1} ] ,"requestId":"r"} ` + "\n",
		`{"eventId":"e","eventId":"f"}`,              // a key twice
		`{"EventID":"e"}`,                            // another case
		`{"eventId":"e\"q"}`, `{"eventId":"\u0041"}`, // escapes
		`{"eventId":"bad` + "\xff" + `"}`,                   // invalid UTF-8
		`{"eventId":"ctl` + "\x01" + `"}`,                   // a control character
		`{"items":[{"num":01}]}`, `{"items":[{"num":1.0}]}`, // not integers
		`{"items":[{"num":1e2}]}`, `{"items":[{"num":-0}]}`, `{"items":[{"num":-}]}`,
		`{"items":[{"type":99999999999}]}`, `{"items":[{"num":123456789012345678901}]}`,
		`{"items":null}`, `{"pin":null}`, `{"extra":1}`, `{"items":[]}`, `{"items":[{}]}`,
		`{"eventId":"e"} x`, `{"eventId":"e",}`, `{"eventId" "e"}`, `[]`, `null`, ``, `{`,
		`{"items":[{"promoId":"A"},]}`, `{"items":[{"promoId":"A"} {"promoId":"B"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast Event
		if !decodeJSON(b, &fast) {
			return
		}
		var slow Event
		if err := json.Unmarshal(b, &slow); err != nil {
			t.Fatalf("decodeJSON accepted what encoding/json refuses (%v): %q", err, b)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("decodeJSON and encoding/json differ on %q:\n fast %#v\n json %#v", b, fast, slow)
		}
	})
}

// What producers write takes the fast path: AppendJSON's events, one to three items.
func TestDecodeJSONTakesProducersEvents(t *testing.T) {
	e := Event{EventID: "9f86d081884c7d659a2feaa0c55ad015", Kind: Grab, RequestID: "b1a2c3-000123", Pin: "p98765", IP: "198.18.0.77",
		OccurredAt: "2026-12-01T16:30:00.123Z", BodyHash: strings.Repeat("9f", 32)}
	for n := 1; n <= 3; n++ {
		e.Items = append(e.Items, Item{PromoID: "hot-" + string(rune('0'+n)), Type: n, Num: int64(n), Shard: 15})
		for _, ev := range []Event{e, {EventID: "c", Kind: Cancel, RequestID: e.RequestID, Pin: "x", IP: "y", Items: e.Items, OccurredAt: e.OccurredAt, Reason: "USER_CANCELLED"}} {
			var have Event
			if !decodeJSON(ev.AppendJSON(nil), &have) || !reflect.DeepEqual(have, ev) {
				t.Fatalf("%d items: decodeJSON gave %#v for %#v", n, have, ev)
			}
		}
	}
}

// BenchmarkDecode: a two-item GRAB decoded by decodeJSON and by encoding/json (the
// checks Decode then runs are not included).
//
//	go test -run '^$' -bench Decode -benchmem ./internal/flow
func BenchmarkDecode(b *testing.B) {
	e := Event{EventID: "9f86d081884c7d659a2feaa0c55ad015", Kind: Grab, RequestID: "b1a2c3-000123", Pin: "p98765", IP: "198.18.0.77",
		Items:      []Item{{PromoID: "b1a2c3-hot-0", Type: 1, Num: 1, Shard: 7}, {PromoID: "b1a2c3-hot-1", Type: 1, Num: 2, Shard: 3}},
		OccurredAt: "2026-12-01T16:30:00.123Z", BodyHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}
	msg := e.AppendJSON(nil)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var e Event
			if !decodeJSON(msg, &e) {
				b.Fatal("not decoded")
			}
		}
	})
	b.Run("reflection", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var e Event
			if err := json.Unmarshal(msg, &e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
