package jsonx

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppendString holds AppendString to encoding/json byte for byte, whatever the
// string holds.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "G", `q"uote\back`, "ctl\x00\x01\x1f\x7f", "<&>", "héllo 世界", "bad\xff\xfeutf8", "ls\u2028ps\u2029", "\xe2\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		if have := AppendString(nil, s); !bytes.Equal(have, bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Fatalf("AppendString(%q)\n have %s\n want %s", s, have, want.Bytes())
		}
	})
}
