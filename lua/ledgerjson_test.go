package lua

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzLedgerJSON holds AppendJSON to encoding/json byte for byte (HTML escaping
// off, the one liberty it takes), whatever the strings hold.
func FuzzLedgerJSON(f *testing.F) {
	for _, s := range []string{"", "G", `q"uote\back`, "ctl\x00\x01\x1f\x7f", "<&>", "héllo 世界", "bad\xff\xfeutf8", "ls\u2028ps\u2029", "\xe2\x80"} {
		f.Add(s, s, s, int64(-3), s)
	}
	f.Fuzz(func(t *testing.T, hash, pin, ip string, num int64, reason string) {
		for _, e := range []LedgerEntry{
			{State: LedgerCommitted, BodyHash: hash, Num: num, Pin: pin, IP: ip, DeadlineMs: num * 7},
			{State: LedgerReturned, BodyHash: hash, Num: num, Pin: pin, IP: ip, Reason: reason},
			{State: LedgerAbortRecorded, BodyHash: hash, Num: num, Pin: pin, IP: ip, Reason: reason, Part: reason},
			{State: LedgerCommitted, BodyHash: hash, Num: num, Pin: pin, IP: ip, IPKey: reason, DeadlineMs: num},
		} {
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(e); err != nil {
				t.Fatal(err)
			}
			if have := e.AppendJSON(nil); !bytes.Equal(have, bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
				t.Fatalf("AppendJSON\n have %s\n want %s", have, want.Bytes())
			}
		}
	})
}
