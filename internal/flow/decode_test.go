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
	pool := grab
	pool.Items = []Item{{PromoID: "P", Type: 1, Num: 2, Shard: 3, Amount: 250, Parts: []int{7, 12}}}
	held := grab
	held.HoldUntil = 1_796_306_597_636
	held.Channel = "APP"
	confirm := Event{EventID: "e3", Kind: Confirm, RequestID: "r-1", Pin: "alice", IP: "10.0.0.1",
		Items: grab.Items, OccurredAt: "2026-11-11T12:00:02.000Z"}
	for _, e := range []Event{grab, cancel, pool, held, confirm, {}, {Items: []Item{}}} {
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
		`{"items":[{"parts":[]}]}`, `{"items":[{"parts":null}]}`, `{"items":[{"parts":[1,]}]}`, `{"items":[{"parts":[1 2]}]}`,
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
		if n == 3 { // a bucketed item that counted the ip nowhere
			e.Items[2].Bucket, e.Items[2].Buckets, e.Items[2].NoIP = 5, 8, true
		}
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

// An envelope pool's item: its parts round-trip, and Decode refuses parts that are
// not num of them, an amount without parts, more than a grab may take, and an
// index beyond any pool.
func TestDecodeChecksAnEnvelopePoolsItem(t *testing.T) {
	ev := func(it Item) []byte {
		return Event{EventID: "e", Kind: Grab, RequestID: "r", Pin: "p", IP: "10.0.0.1",
			Items: []Item{it}, OccurredAt: "2026-12-01T16:30:00.123Z"}.AppendJSON(nil)
	}
	good := Item{PromoID: "P", Type: 1, Num: 2, Shard: 3, Amount: 250, Parts: []int{7, 12}}
	if e, err := Decode(ev(good)); err != nil || !reflect.DeepEqual(e.Items[0], good) {
		t.Fatalf("a pool's item: %+v %v", e.Items, err)
	}
	many := make([]int, 1001)
	for i := range many {
		many[i] = i
	}
	for name, it := range map[string]Item{
		"parts not num":        {PromoID: "P", Type: 1, Num: 3, Amount: 250, Parts: []int{7, 12}},
		"an amount, no parts":  {PromoID: "P", Type: 1, Num: 2, Amount: 250},
		"above a grab's parts": {PromoID: "P", Type: 1, Num: 1001, Amount: 5000, Parts: many},
		"an index beyond":      {PromoID: "P", Type: 1, Num: 1, Amount: 5, Parts: []int{100_000}},
		"a negative amount":    {PromoID: "P", Type: 1, Num: 1, Amount: -5, Parts: []int{1}},
		"in buckets":           {PromoID: "P", Type: 1, Num: 1, Amount: 5, Parts: []int{1}, Buckets: 2},
		"noIp of one bucket":   {PromoID: "P", Type: 1, Num: 1, NoIP: true},
	} {
		if _, err := Decode(ev(it)); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// A GRAB's channel round-trips; one outside the contract is no event of ours.
func TestDecodeChecksTheChannel(t *testing.T) {
	ev := Event{EventID: "e", Kind: Grab, RequestID: "r", Pin: "p", IP: "10.0.0.1",
		Items: []Item{{PromoID: "P", Type: 1, Num: 1}}, OccurredAt: "2026-12-01T16:30:00.123Z", Channel: "WECHAT"}
	if e, err := Decode(ev.AppendJSON(nil)); err != nil || e.Channel != "WECHAT" {
		t.Fatalf("a GRAB on WECHAT: %+v %v", e, err)
	}
	for _, bad := range []string{"wechat", "SMS", "APP,WEB"} {
		ev.Channel = bad
		if _, err := Decode(ev.AppendJSON(nil)); err == nil {
			t.Errorf("channel %q decoded", bad)
		}
	}
}
