package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunRefusesBadInput(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"grabPerGrant": -1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--headroom", "1"}, {"--hot-share", "2"}, {"--grants", "-1"}, {"--figures", "/nonexistent"}, {"--figures", bad}} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("plan %v: no error", args)
		}
	}
	var out bytes.Buffer
	if err := run([]string{"--examples"}, &out); err != nil || strings.Count(out.String(), "Saturates first") != len(workedExamples) {
		t.Fatalf("examples: %v\n%s", err, out.String())
	}
}
