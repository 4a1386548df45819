package configcenter

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// Scenarios that drive nacos-sdk-go through its reconnect path. The SDK has data
// races of its own there, which fail any test under -race whatever our code
// does. Under -race such a scenario runs in a child process (this test binary,
// with GORACE exitcode=0), and the parent fails on every race report unless both
// of its accesses are inside the SDK: a race touching our code still fails.

// checker is what the scenarios and helpers need of a test; *testing.T has it.
type checker interface {
	Helper()
	Name() string
	Cleanup(func())
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

const scenarioEnv = "CONFIGCENTER_SCENARIO"

var scenarios = map[string]func(checker){
	"restart": restartScenario,
}

func TestMain(m *testing.M) {
	if name := os.Getenv(scenarioEnv); name != "" {
		os.Exit(runChild(name))
	}
	os.Exit(m.Run())
}

// runScenario runs a scenario in this test, or under -race in a child process.
func runScenario(t *testing.T, name string) {
	t.Helper()
	if !raceEnabled {
		scenarios[name](t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), scenarioEnv+"="+name, "GORACE=exitcode=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scenario %s: %v\n%s", name, err, out)
	}
	reports := raceReports(string(out))
	for _, r := range reports {
		if !insideSDK(r) {
			t.Errorf("data race outside nacos-sdk-go in scenario %s:\n%s", name, r)
		}
	}
	t.Logf("scenario %s passed in a child process; %d race report(s) inside nacos-sdk-go tolerated", name, len(reports))
}

// raceReports splits the race detector's output into reports.
func raceReports(out string) []string {
	var reports []string
	for _, part := range strings.Split(out, "WARNING: DATA RACE")[1:] {
		if end := strings.Index(part, "=================="); end >= 0 {
			part = part[:end]
		}
		reports = append(reports, part)
	}
	return reports
}

// accessHeader starts a report's "Read at 0x... by goroutine N:" sections.
var accessHeader = regexp.MustCompile(`^[A-Za-z ]*(?:[Rr]ead|[Ww]rite) at 0x[0-9a-f]+ by `)

// insideSDK reports whether both accesses of a race were made by nacos-sdk-go:
// the first frame of each access outside the standard library (sync/atomic,
// runtime) must be the SDK's.
func insideSDK(report string) bool {
	accesses := 0
	for _, section := range strings.Split(report, "\n\n") {
		lines := strings.Split(strings.TrimSpace(section), "\n")
		if !accessHeader.MatchString(lines[0]) {
			continue
		}
		accesses++
		first := ""
		for _, l := range lines[1:] {
			fn := strings.TrimSpace(l)
			if strings.HasPrefix(fn, "/") || strings.HasPrefix(fn, "<") {
				continue // a file:line line
			}
			if pkg, _, _ := strings.Cut(fn, "/"); strings.Contains(pkg, ".") {
				first = fn
				break
			}
		}
		if !strings.HasPrefix(first, "github.com/nacos-group/nacos-sdk-go/") {
			return false
		}
	}
	return accesses >= 2
}

// runChild runs a scenario as this process's whole job and gives its exit code.
func runChild(name string) int {
	run, ok := scenarios[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "unknown scenario %q\n", name)
		return 2
	}
	c := &childT{name: name}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer c.cleanup()
		run(c)
	}()
	<-done
	if c.failed {
		return 1
	}
	return 0
}

// childT is a checker outside the testing package.
type childT struct {
	name     string
	cleanups []func()
	failed   bool
}

func (c *childT) Helper()          {}
func (c *childT) Name() string     { return "scenario-" + c.name }
func (c *childT) Cleanup(f func()) { c.cleanups = append(c.cleanups, f) }

func (c *childT) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "scenario %s: %s\n", c.name, fmt.Sprintf(format, args...))
	c.failed = true
}

// Fatalf stops the scenario's goroutine, as t.Fatalf does; clean-ups still run.
func (c *childT) Fatalf(format string, args ...any) {
	c.Errorf(format, args...)
	runtime.Goexit()
}

func (c *childT) cleanup() {
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		c.cleanups[i]()
	}
}
