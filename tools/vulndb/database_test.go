package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The layout and index contents govulncheck's file:// client reads, for two entries:
// the highest fix by semver order (1.10.0 over 1.2.0), none when a range
// re-introduces the vulnerability after its last fix, the newest modified time.
// (The full data/osv of golang.org/x/vulndb was checked byte for byte against
// cmd/indexdb's output when this was written.)
func TestWrite(t *testing.T) {
	db, err := load("testdata/osv")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "db")
	if err := writeAtomic(db, out); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"index/db.json": `{"modified":"2099-01-02T03:04:05Z"}`,
		"index/modules.json": `[{"path":"example.com/a","vulns":[` +
			`{"id":"GO-2099-0001","modified":"2099-01-02T03:04:05Z","fixed":"1.10.0"},` +
			`{"id":"GO-2099-0002","modified":"2098-01-01T00:00:00Z","fixed":"0.9.0-rc.1"}]},` +
			`{"path":"example.com/b","vulns":[{"id":"GO-2099-0001","modified":"2099-01-02T03:04:05Z"}]}]`,
		"index/vulns.json": `[{"id":"GO-2099-0001","modified":"2099-01-02T03:04:05Z","aliases":["CVE-2099-1"]},` +
			`{"id":"GO-2099-0002","modified":"2098-01-01T00:00:00Z"}]`,
	}
	for name, w := range want {
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != w {
			t.Errorf("%s:\n got %s\nwant %s", name, b, w)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "ID", "GO-2099-0002.json")); err != nil {
		t.Error(err)
	}
}

func TestLoadRefusesDuplicateID(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("testdata/osv/GO-2099-0002.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"GO-2099-0002.json", "copy.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := load(dir); err == nil {
		t.Fatal("two entries with one id loaded")
	}
}
