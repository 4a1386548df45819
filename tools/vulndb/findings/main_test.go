package main

import (
	"io"
	"strings"
	"testing"
)

// A called vulnerability fails the check unless accepted for its module: the
// standard library's part of an entry accepted leaves the module's part failing.
func TestReport(t *testing.T) {
	stream := `{"osv":{"id":"GO-1","summary":"s"}}
{"finding":{"osv":"GO-1","trace":[{"module":"stdlib","version":"v1.26.8"}]}}
{"finding":{"osv":"GO-1","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"Serve"},{"module":"m","package":"m","function":"main"}]}}
{"finding":{"osv":"GO-1","fixed_version":"v0.60.0","trace":[{"module":"golang.org/x/net","version":"v0.59.0","package":"golang.org/x/net/http2"}]}}
`
	vulns, summaries, err := read(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	accept := map[string]string{"GO-1 stdlib": "toolchain"}
	if code := report(io.Discard, "t", vulns, summaries, accept); code != 0 {
		t.Errorf("stdlib part accepted, x/net part only imported: exit %d, want 0", code)
	}
	vulns["GO-1 golang.org/x/net"].level = 3
	if code := report(io.Discard, "t", vulns, summaries, accept); code != 3 {
		t.Errorf("x/net part called, not accepted: exit %d, want 3", code)
	}
	if code := report(io.Discard, "t", vulns, summaries, nil); code != 3 {
		t.Errorf("nothing accepted: exit %d, want 3", code)
	}
}
