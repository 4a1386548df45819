package validate

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
)

// Dockerfile builds every service image; compose and Kubernetes name its targets.
const Dockerfile = "deploy/docker/Dockerfile"

// ServiceTargets are the Dockerfile targets, one per shipped image, with the binary
// each one's entrypoint runs and its API port (recovery's: the flow sink's); their ops
// ports are OpsPorts.
var ServiceTargets = map[string]struct {
	Binary string
	Port   string
}{
	"grab-service": {"grab-service", "8080"},
	"promo-admin":  {"promo-admin", "8081"},
	"recovery":     {"recovery", "8082"},
}

func parseDockerfile(t *testing.T) ([]instructions.Stage, []instructions.ArgCommand) {
	data, err := os.ReadFile(Path(Dockerfile))
	if err != nil {
		t.Fatal(err)
	}
	res, err := parser.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s: %v", Dockerfile, err)
	}
	for _, w := range res.Warnings {
		t.Errorf("%s: parser warning: %s", Dockerfile, w.Short)
	}
	// BuildKit's own checks (docker build --check): every rule, warnings are failures.
	lint := linter.New(&linter.Config{Warn: func(rule, desc, url, msg string, loc []parser.Range) {
		t.Errorf("%s:%v: %s: %s", Dockerfile, loc, rule, msg)
	}})
	stages, args, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("%s: %v", Dockerfile, err)
	}
	return stages, args
}

func TestDockerfile(t *testing.T) {
	stages, metaArgs := parseDockerfile(t)
	byName := map[string]instructions.Stage{}
	for _, s := range stages {
		byName[s.Name] = s
	}
	args := map[string]string{}
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			if kv.Value == nil {
				t.Errorf("ARG %s has no default: builds must be reproducible without --build-arg", kv.Key)
				continue
			}
			args[kv.Key] = *kv.Value
		}
	}
	// Base images are pinned by tag and digest and supported; the Go image's Go is at
	// least the go.mod's.
	goImage, goToolchain := "", ""
	for _, s := range stages {
		img := s.BaseName
		for k, v := range args {
			img = strings.ReplaceAll(img, "${"+k+"}", v)
		}
		if _, ok := byName[img]; ok {
			continue
		}
		if strings.HasPrefix(img, "golang:") {
			goImage, goToolchain = img, stageToolchain(s)
		}
		for _, err := range []error{CheckImagePinned(img), CheckAlpineSupported(img, time.Now())} {
			if err != nil {
				t.Errorf("stage %s: %v", s.Name, err)
			}
		}
	}
	goMod, err := os.ReadFile(Path("go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mf, err := modfile.ParseLax("go.mod", goMod, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The build stage's Go is its GOTOOLCHAIN when it names one, else the image's.
	_, tag, _ := splitImage(goImage)
	goVersion, _, _ := strings.Cut(tag, "-")
	if goToolchain != "" {
		goVersion = goToolchain
	}
	if semver.Compare("v"+goVersion, "v"+mf.Go.Version) < 0 {
		t.Errorf("the build stage's Go (%s, image %q) is older than go.mod's go %s", goVersion, goImage, mf.Go.Version)
	}
	// The build stage copies files that exist.
	for _, s := range stages {
		for _, c := range s.Commands {
			cp, ok := c.(*instructions.CopyCommand)
			if !ok || cp.From != "" {
				continue
			}
			for _, src := range cp.SourcePaths {
				if src == "." {
					continue
				}
				matches, _ := filepath.Glob(Path(src))
				if len(matches) == 0 {
					t.Errorf("stage %s copies %s, which is not in the repository", s.Name, src)
				}
			}
		}
	}
	for target, want := range ServiceTargets {
		s, ok := byName[target]
		if !ok {
			t.Errorf("no stage %q", target)
			continue
		}
		var entry []string
		var user string
		var exposed []string
		for _, c := range s.Commands {
			switch c := c.(type) {
			case *instructions.EntrypointCommand:
				entry = c.CmdLine
			case *instructions.UserCommand:
				user = c.User
			case *instructions.ExposeCommand:
				exposed = append(exposed, c.Ports...)
			}
		}
		if base, ok := byName[s.BaseName]; ok && user == "" {
			for _, c := range base.Commands {
				if u, ok := c.(*instructions.UserCommand); ok {
					user = u.User
				}
			}
		}
		if len(entry) != 1 || entry[0] != "/usr/local/bin/"+want.Binary {
			t.Errorf("stage %s: ENTRYPOINT %v, want [/usr/local/bin/%s]", target, entry, want.Binary)
		}
		if user == "" || user == "root" || strings.HasPrefix(user, "0") {
			t.Errorf("stage %s runs as root", target)
		}
		if !slices.Contains(exposed, want.Port) {
			t.Errorf("stage %s: EXPOSE %v, want %s", target, exposed, want.Port)
		}
	}
}

// The dockerignore beside the Dockerfile keeps local state out of the build context.
func TestDockerignore(t *testing.T) {
	data, err := os.ReadFile(Path(Dockerfile + ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	for _, must := range []string{".git", ".run", "bin"} {
		if !slices.Contains(lines, must) {
			t.Errorf("%s.dockerignore must exclude %s", Dockerfile, must)
		}
	}
	for _, l := range lines {
		for _, needed := range []string{"go.mod", "go.work", "deploy/build.sh", "grab-service", "promo-admin", "recovery", "internal", "lua"} {
			if strings.TrimPrefix(l, "/") == needed {
				t.Errorf("%s.dockerignore excludes %s, which the build needs", Dockerfile, needed)
			}
		}
	}
}

// The binaries the images copy are the ones deploy/build.sh makes (once `make build` ran).
func TestDockerBinariesAreBuilt(t *testing.T) {
	if _, err := os.Stat(Path("bin")); err != nil {
		t.Skip("bin/ not built yet (deploy/build.sh)")
	}
	for _, want := range ServiceTargets {
		if _, err := os.Stat(Path("bin", want.Binary)); err != nil {
			t.Errorf("deploy/build.sh made no bin/%s, which the Dockerfile copies", want.Binary)
		}
	}
}

// stageToolchain is the Go release a stage's ENV GOTOOLCHAIN=goX.Y.Z asks for, or "".
func stageToolchain(s instructions.Stage) string {
	for _, c := range s.Commands {
		env, ok := c.(*instructions.EnvCommand)
		if !ok {
			continue
		}
		for _, kv := range env.Env {
			if kv.Key == "GOTOOLCHAIN" && strings.HasPrefix(kv.Value, "go") {
				return strings.TrimPrefix(kv.Value, "go")
			}
		}
	}
	return ""
}
