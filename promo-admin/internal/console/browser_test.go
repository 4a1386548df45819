package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath is Debian's chromium. The browser test needs it and fails, never
// skips, without it: `make test` installs it (deploy/local/deps.sh --test).
const chromiumPath = "/usr/bin/chromium"

func findChromium(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err == nil {
		return chromiumPath
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Fatalf("chromium is not installed (looked for %s and chromium on PATH): the console's browser test needs it; "+
		"install it with `apt-get install -y chromium`, as `make test` does through deploy/local/deps.sh --test", chromiumPath)
	return ""
}

// browser is one headless Chromium with one tab, closed when the test ends.
// Uncaught exceptions of the page fail the test.
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string // directory of the screenshots

	mu     sync.Mutex
	thrown []string
}

func startBrowser(t *testing.T, shots string) *browser {
	t.Helper()
	exe := findChromium(t)
	profile := t.TempDir() // a fresh profile; removed after the browser has exited (cleanups run last-in first-out)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(profile),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true), // the tests run as root
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.WindowSize(1400, 1000),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // kills the browser and waits for it
	})
	b := &browser{t: t, ctx: ctx, shots: shots}
	// Listen starts the browser, which lives as long as ctx: ctx has no deadline
	// of its own (each action below has one).
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			d := e.ExceptionDetails
			msg := fmt.Sprintf("%s at %s:%d:%d", d.Text, d.URL, d.LineNumber+1, d.ColumnNumber+1)
			if d.Exception != nil {
				msg += ": " + d.Exception.Description
			}
			b.mu.Lock()
			b.thrown = append(b.thrown, msg)
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start %s: %v", exe, err)
	}
	t.Cleanup(b.checkExceptions)
	return b
}

func (b *browser) checkExceptions() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.thrown {
		b.t.Errorf("uncaught exception in the page: %s", e)
	}
}

// run runs actions, failing the test (with a screenshot) if one fails.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail("%s: %v", what, err)
	}
}

// fail saves a screenshot of the page as it is and fails the test.
func (b *browser) fail(format string, args ...any) {
	b.t.Helper()
	msg := fmt.Sprintf(format, args...)
	b.screenshot("failure")
	b.t.Fatalf("%s (screenshot in %s)", msg, b.shots)
}

// click clicks the first element matching the CSS selector, once it is visible.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.run("click "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// fill replaces the value of the input matching sel, as typing would.
func (b *browser) fill(sel, value string) {
	b.t.Helper()
	b.run("fill "+sel, chromedp.SetValue(chromedp.CSS(sel), value))
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.fail("evaluate %s: %v", expr, err)
	}
	return v
}

// text is the text of the first element matching sel, and whether there is one.
func (b *browser) text(sel string) (string, bool) {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	v := eval[*string](b, fmt.Sprintf(`(() => { const e = document.querySelector(%s); return e ? e.textContent.trim() : null })()`, q))
	if v == nil {
		return "", false
	}
	return *v, true
}

// visible reports whether an element matching sel is rendered.
func (b *browser) visible(sel string) bool {
	b.t.Helper()
	q, _ := json.Marshal(sel)
	return eval[bool](b, fmt.Sprintf(`(() => { const e = document.querySelector(%s); return !!e && e.getClientRects().length > 0 })()`, q))
}

// waitFor polls until cond holds, failing the test after within with what.
func (b *browser) waitFor(within time.Duration, what string, cond func() bool) {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			b.fail("not within %v: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitText waits until the text of sel satisfies ok, and returns it.
func (b *browser) waitText(within time.Duration, sel string, ok func(string) bool, what string) string {
	b.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s, found := b.text(sel)
		if found && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			b.fail("not within %v: %s (%s shows %q)", within, what, sel, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitTextIs waits until the text of sel is want.
func (b *browser) waitTextIs(within time.Duration, sel, want string) {
	b.t.Helper()
	b.waitText(within, sel, func(s string) bool { return s == want }, fmt.Sprintf("want %q", want))
}

// screenshot writes the whole page as <name>.png into the screenshot directory.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	b.t.Logf("screenshot %s", path)
}

// screenshotDir is where the test writes its screenshots: $CONSOLE_SCREENSHOTS,
// else bench-results/console at the repository root (git-ignored, like the
// benchmarks' results), else a temporary directory.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		if root, ok := repoRoot(); ok {
			dir = filepath.Join(root, "bench-results", "console")
		} else {
			dir = filepath.Join(os.TempDir(), "flashsale-console-screenshots")
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshot directory: %v", err)
	}
	return dir
}

// repoRoot finds the directory holding go.work above the working directory.
func repoRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir || strings.TrimSpace(parent) == "" {
			return "", false
		}
		dir = parent
	}
}
