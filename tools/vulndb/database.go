package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/semver"
)

// entry is the part of an OSV entry the indexes are made of; the entry itself is
// written as it was read (compacted).
type entry struct {
	ID       string    `json:"id"`
	Modified osvTime   `json:"modified"`
	Aliases  []string  `json:"aliases"`
	Affected []affects `json:"affected"`
	raw      []byte
}

type affects struct {
	Module struct {
		Path string `json:"name"`
	} `json:"package"`
	Ranges []struct {
		Type   string `json:"type"`
		Events []struct {
			Introduced string `json:"introduced"`
			Fixed      string `json:"fixed"`
		} `json:"events"`
	} `json:"ranges"`
}

// osvTime is an RFC 3339 time written in UTC, as the OSV schema asks.
type osvTime struct{ time.Time }

func (t osvTime) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.UTC().Format(time.RFC3339))
}

func (t *osvTime) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339, s)
	t.Time = v.UTC()
	return err
}

// The three index endpoints (index/db.json, modules.json, vulns.json).
type dbMeta struct {
	Modified osvTime `json:"modified"`
}

type module struct {
	Path  string       `json:"path"`
	Vulns []moduleVuln `json:"vulns"`
}

type moduleVuln struct {
	ID       string  `json:"id"`
	Modified osvTime `json:"modified"`
	Fixed    string  `json:"fixed,omitempty"`
}

type vuln struct {
	ID       string   `json:"id"`
	Modified osvTime  `json:"modified"`
	Aliases  []string `json:"aliases,omitempty"`
}

type database struct {
	meta    dbMeta
	modules map[string]*module
	entries []entry // in file name order
}

// load reads every <id>.json of dir (index.json, the legacy index, excepted).
func load(dir string) (*database, error) {
	files, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	db := &database{modules: map[string]*module{}}
	seen := map[string]bool{}
	for _, f := range files {
		name := f.Name()
		if f.IsDir() || name == "index.json" || filepath.Ext(name) != ".json" {
			continue
		}
		e, err := readEntry(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if seen[e.ID] {
			return nil, fmt.Errorf("%s: id %q appears twice", name, e.ID)
		}
		seen[e.ID] = true
		db.add(e)
	}
	if len(db.entries) == 0 {
		return nil, fmt.Errorf("%s: no OSV entries", dir)
	}
	return db, nil
}

func readEntry(path string) (entry, error) {
	var e entry
	b, err := os.ReadFile(path)
	if err != nil {
		return e, err
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("%s: %v", path, err)
	}
	if e.ID == "" || strings.ContainsAny(e.ID, `/\.`) {
		return e, fmt.Errorf("%s: id %q is not a database entry name", path, e.ID)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return e, fmt.Errorf("%s: %v", path, err)
	}
	e.raw = c.Bytes()
	return e, nil
}

func (db *database) add(e entry) {
	db.entries = append(db.entries, e)
	if e.Modified.After(db.meta.Modified.Time) {
		db.meta.Modified = e.Modified
	}
	for _, a := range e.Affected {
		m := db.modules[a.Module.Path]
		if m == nil {
			m = &module{Path: a.Module.Path, Vulns: []moduleVuln{}}
			db.modules[a.Module.Path] = m
		}
		m.Vulns = append(m.Vulns, moduleVuln{ID: e.ID, Modified: e.Modified, Fixed: latestFixed(a)})
	}
}

// latestFixed is the version from which no later version is affected, "" if none:
// the highest SEMVER fix, unless a range introduces the vulnerability again after it.
// govulncheck skips the entry for a module at or above it without reading it.
func latestFixed(a affects) string {
	before := func(v, w string) bool { return semver.Compare("v"+v, "v"+w) < 0 }
	var fixed string
	for _, r := range a.Ranges {
		if r.Type != "SEMVER" {
			continue
		}
		for _, ev := range r.Events {
			if ev.Fixed != "" && before(fixed, ev.Fixed) {
				fixed = ev.Fixed
			}
		}
		for _, ev := range r.Events {
			if ev.Introduced != "" && ev.Introduced != "0" && before(fixed, ev.Introduced) {
				fixed = ""
				break
			}
		}
	}
	return fixed
}

// write lays the database out under dir as govulncheck's file:// client reads it.
func (db *database) write(dir string) error {
	for _, d := range []string{"index", "ID"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	mods := make([]*module, 0, len(db.modules))
	for _, m := range db.modules {
		sort.SliceStable(m.Vulns, func(i, j int) bool { return m.Vulns[i].ID < m.Vulns[j].ID })
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Path < mods[j].Path })
	vulns := make([]vuln, 0, len(db.entries))
	for _, e := range db.entries {
		vulns = append(vulns, vuln{ID: e.ID, Modified: e.Modified, Aliases: e.Aliases})
	}
	sort.Slice(vulns, func(i, j int) bool { return vulns[i].ID < vulns[j].ID })
	for name, v := range map[string]any{"db": db.meta, "modules": mods, "vulns": vulns} {
		if err := writeJSON(filepath.Join(dir, "index", name+".json"), v); err != nil {
			return err
		}
	}
	for _, e := range db.entries {
		if err := os.WriteFile(filepath.Join(dir, "ID", e.ID+".json"), e.raw, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
