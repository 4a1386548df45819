package grab

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzResultJSON holds Result.AppendJSON to encoding/json byte for byte (HTML
// escaping off), with and without each optional field, whatever the strings hold.
func FuzzResultJSON(f *testing.F) {
	for _, s := range []string{"", "r-1", `q"uote\back`, "ctl\x00\x1f", "<&>", "héllo 世界", "bad\xff\xfe", "ls\u2028"} {
		for _, present := range []uint8{0x00, 0x07, 0x37, 0x0f, 0x43, 0xf7, 0xff} { // none; 3 items with remaining; those, failedItem and message; empty items; 3 with amount; all but empty (decision too); all
			f.Add(s, s, s, -3, int64(7), present)
		}
	}
	f.Fuzz(func(t *testing.T, rid, promoID, msg string, n int, num int64, present uint8) {
		r := Result{RequestID: rid, Result: Outcome(msg), RetryAfter: 5}
		rem, amount := num-1, num*3
		for i := range int(present & 3) {
			it := ItemResult{PromoID: promoID, Type: n + i, Num: num}
			if present&4 != 0 {
				it.Remaining = &rem
			}
			if present&64 != 0 {
				it.Amount = &amount
			}
			r.Items = append(r.Items, it)
		}
		if present&8 != 0 {
			r.Items = []ItemResult{} // empty, not nil: left out as well
		}
		if present&16 != 0 {
			r.FailedItem = &n
		}
		if present&32 != 0 {
			r.Message = msg
		}
		if present&128 != 0 {
			r.Decision = Decision(promoID)
		}
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		if have := r.AppendJSON(nil); !bytes.Equal(have, bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Fatalf("AppendJSON\n have %s\n want %s", have, want.Bytes())
		}
	})
}
