package validate

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashsale/platform/deploy/validate/k8sgen"
)

// pinFixture copies the files deploy/pin-image.sh edits into a temporary root and puts
// a stand-in docker first on PATH that answers `buildx imagetools inspect REF` from
// digests (REF -> digest). The registry cannot be reached from here: the stand-in is
// the one mock, and it answers exactly what imagetools prints (a JSON string).
func pinFixture(t *testing.T, digests map[string]string) (root string, run func(args ...string) (string, error)) {
	t.Helper()
	root = t.TempDir()
	var files []string
	for _, pattern := range []string{"deploy/compose/compose.yaml", "deploy/k8s/*.yaml", "deploy/validate/k8sgen/k8sgen.go", "deploy/docker/Dockerfile"} {
		m, _ := filepath.Glob(Path(pattern))
		files = append(files, m...)
	}
	for _, f := range files {
		rel, _ := filepath.Rel(Root(), f)
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var table strings.Builder
	for ref, d := range digests {
		fmt.Fprintf(&table, "%s %s\n", ref, d)
	}
	stub := filepath.Join(root, "docker")
	script := "#!/bin/sh\n# docker buildx imagetools inspect REF --format ...\nwhile read -r ref d; do [ \"$ref\" = \"$4\" ] && { printf '\"%s\"\\n' \"$d\"; exit 0; }; done <<'T'\n" +
		table.String() + "T\necho \"ERROR: $4: not found\" >&2; exit 1\n"
	if err := os.WriteFile(stub, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return root, func(args ...string) (string, error) {
		cmd := exec.Command(Path("deploy", "pin-image.sh"), args...)
		cmd.Env = append(os.Environ(), "FLASHSALE_ROOT="+root, "DOCKER="+stub)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(p) != "docker" {
			data, _ := os.ReadFile(p)
			out[strings.TrimPrefix(p, root)] = string(data)
		}
		return err
	})
	return out
}

// Pinning a new Redis tag rewrites every mention of the Redis pin, and no other line.
func TestPinImageRewritesEveryMention(t *testing.T) {
	newDigest := "sha256:" + strings.Repeat("1a", 32)
	root, run := pinFixture(t, map[string]string{"redis:8.10.3-alpine3.23": newDigest})
	before := readTree(t, root)
	if out, err := run("redis:8.10.3-alpine3.23"); err != nil {
		t.Fatalf("pin-image: %v\n%s", err, out)
	}
	after := readTree(t, root)
	old, want := k8sgen.RedisImage, "redis:8.10.3-alpine3.23@"+newDigest
	changed, mentions := 0, 0
	for path, text := range before {
		mentions += strings.Count(text, old)
		oldLines, newLines := strings.Split(text, "\n"), strings.Split(after[path], "\n")
		if len(oldLines) != len(newLines) {
			t.Fatalf("%s: the line count changed", path)
		}
		for i := range oldLines {
			if oldLines[i] == newLines[i] {
				continue
			}
			changed++
			if !strings.Contains(oldLines[i], old) || newLines[i] != strings.ReplaceAll(oldLines[i], old, want) {
				t.Errorf("%s:%d: %q became %q", path, i+1, oldLines[i], newLines[i])
			}
		}
		if strings.Contains(after[path], old) {
			t.Errorf("%s still names %s", path, old)
		}
	}
	if mentions < 18 || changed != mentions {
		t.Errorf("%d lines changed; the files named the Redis pin %d times (16 shards, compose's two, the generator's)", changed, mentions)
	}
}

// --check passes while every pinned tag still names its digest, and lists the one
// that moved; a tag the registry does not know fails the run.
func TestPinImageCheck(t *testing.T) {
	digests := map[string]string{}
	for ref := range imageRefs(t) {
		if name, tag, digest := splitImage(ref); tag != "" && digest != "" {
			digests[name+":"+tag] = digest
		}
	}
	if _, run := pinFixture(t, digests); true {
		if out, err := run("--check"); err != nil {
			t.Fatalf("--check with every pin current: %v\n%s", err, out)
		}
	}
	moved := "sha256:" + strings.Repeat("2b", 32)
	digests["prom/prometheus:v2.53.5"] = moved
	_, run := pinFixture(t, digests)
	out, err := run("--check")
	if err == nil || !strings.Contains(out, "moved: prom/prometheus:v2.53.5") || !strings.Contains(out, moved) || strings.Count(out, "moved:") != 1 {
		t.Errorf("--check with one moved tag: err %v\n%s", err, out)
	}
	delete(digests, "prom/prometheus:v2.53.5")
	_, run = pinFixture(t, digests)
	if out, err := run("--check"); err == nil || !strings.Contains(out, "cannot resolve prom/prometheus:v2.53.5") {
		t.Errorf("--check with an unknown tag: err %v\n%s", err, out)
	}
}

// Bad input changes nothing: a digest, latest, an image no file names, a tag the
// registry does not know.
func TestPinImageRefusesBadInput(t *testing.T) {
	root, run := pinFixture(t, map[string]string{"nosuch/image:1.0": "sha256:" + strings.Repeat("3c", 32)})
	before := readTree(t, root)
	for _, args := range [][]string{
		{"redis:8.10.2-alpine3.23@sha256:" + strings.Repeat("3c", 32)}, {"redis:latest"}, {"redis"},
		{"nosuch/image:1.0"}, {"redis:9.9.9"}, {"Redis:8"},
	} {
		if out, err := run(args...); err == nil {
			t.Errorf("%v: accepted\n%s", args, out)
		}
	}
	if after := readTree(t, root); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Error("a refused pin changed the files")
	}
}
