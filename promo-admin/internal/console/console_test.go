package console_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/lua"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// The page itself needs no token; it is served with a strict content policy.
func TestPageLoadsWithoutToken(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	for path, ctype := range map[string]string{
		"/console/":            "text/html",
		"/console/console.js":  "text/javascript",
		"/console/console.css": "text/css",
	} {
		r := e.Do(http.MethodGet, path, "", nil)
		if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), ctype) ||
			!strings.Contains(r.Header.Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s: %d %v", path, r.Status, r.Header)
		}
	}
	if r := e.Do(http.MethodGet, "/console/no-such-file", "", nil); r.Status != http.StatusNotFound {
		t.Errorf("GET a missing file: %s", r)
	}
	if r := e.Do(http.MethodGet, "/v1/promotions", "", nil); r.Status != http.StatusUnauthorized {
		t.Errorf("the API still needs a token: %s", r)
	}
}

const switchesDoc = `{"grabEnabled":true,"kafkaDegrade":true,"degradeRateFactor":0.5,` +
	`"methodLimits":{"grab":500,"cancel":0},"blockedPromotions":["X9_99"]}`

// TestConsoleEndToEnd clicks through the console in headless Chromium against an
// in-process promo-admin (the local stack's Redis shards, a throwaway MySQL
// database): sign-in, the switches view, a create refused and then accepted, the
// live counter falling while grabs run straight into Redis, a patch refused and
// then accepted, stop, delete and sign-out, checking what the page shows at each
// step. Screenshots go to bench-results/console/ (see screenshotDir).
func TestConsoleEndToEnd(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "switches.json")
	if err := os.WriteFile(file, []byte(switchesDoc), 0o644); err != nil {
		t.Fatal(err)
	}
	e := admintest.Start(t, admintest.Options{Switches: configcenter.FileSource{Path: file}})
	shards := testenv.Shards(t)
	b := startBrowser(t, screenshotDir(t))

	id := "console-" + testenv.Suffix()
	key := promo.Key(id, 1)
	c := &consoleRun{e: e, b: b, file: file, id: id, key: key, shard: shards[ring.Default.Shard(key)],
		row: fmt.Sprintf(`tr[data-key="%s/1"]`, id)}
	c.signIn()
	c.switchesView()
	c.create()
	c.load()
	c.patch()
	c.stop()
	c.deleteAndSignOut()
}

// buyers is how many grabs TestConsoleEndToEnd's load makes.
const buyers = 240

// consoleRun is TestConsoleEndToEnd's promotion id on its shard, clicked
// through the console in b; row selects the promotion's row of the list.
type consoleRun struct {
	e                  *admintest.Env
	b                  *browser
	file, id, key, row string
	shard              *redis.Client
}

func (c *consoleRun) signIn() {
	b := c.b
	// Sign in: an unknown token is refused with the API's message (GET
	// /v1/whoami's 401); a viewer is shown as such, reads, and is offered no create.
	b.run("open the console", chromedp.Navigate(c.e.Server.URL+"/console/"))
	b.waitFor(30*time.Second, "the sign-in form", func() bool { return b.visible("#sign-in") })
	b.fill("#token", "not-a-token")
	b.click(`#sign-in button[type="submit"]`)
	b.waitText(15*time.Second, "#token-error", func(s string) bool { return strings.Contains(s, "UNAUTHORIZED") }, "unknown token refused")
	if b.visible("#app") {
		b.fail("the console opened with an unknown token")
	}

	b.fill("#token", admintest.ViewerToken)
	b.click(`#sign-in button[type="submit"]`)
	b.waitFor(15*time.Second, "the console after sign-in", func() bool { return b.visible("#app") })
	b.waitTextIs(15*time.Second, "#whoami", "unnamed token (viewer)") // the test's viewer token has no name
	b.waitFor(15*time.Second, "the list and the switches for a viewer", func() bool { return b.visible("#promotions") && b.visible("#switches") })
	if b.visible("#create") || b.visible("#create-form") {
		b.fail("a viewer is offered the create form")
	}
	b.click("#sign-out")
	b.waitFor(15*time.Second, "the sign-in form after sign-out", func() bool { return b.visible("#sign-in") && !b.visible("#app") })

	b.fill("#token", admintest.AdminToken)
	b.click(`#sign-in button[type="submit"]`)
	b.waitFor(15*time.Second, "the console after sign-in", func() bool { return b.visible("#app") })
	stored := eval[string](b, `sessionStorage.getItem("flashsale.console.token") || ""`)
	if stored != admintest.AdminToken {
		b.fail("sessionStorage holds %q, want the token signed in with", stored)
	}
	b.waitTextIs(15*time.Second, "#whoami", admintest.MerchandiserName+" (merchandiser)")
	b.waitFor(15*time.Second, "the create form for a merchandiser", func() bool { return b.visible("#create-form") })

}

func (c *consoleRun) switchesView() {
	b, file := c.b, c.file
	// The switches view shows the document in force.
	sum := md5.Sum([]byte(switchesDoc))
	b.waitText(15*time.Second, "#switches-facts", func(s string) bool { return strings.Contains(s, hex.EncodeToString(sum[:])) },
		"the switches document's md5")
	facts, _ := b.text("#switches-facts")
	for _, want := range []string{"enabled", "on: flows go to MySQL", "0.5", "500/s per instance", "X9_99", "file:" + file} {
		if !strings.Contains(facts, want) {
			b.fail("switches view lacks %q: %q", want, facts)
		}
	}
	b.screenshot("01-signed-in")

}

func (c *consoleRun) create() {
	b, id, row := c.b, c.id, c.row
	// Create: the API's message appears next to the field it names, and nothing is created.
	b.fill(`#create-form [name="promoId"]`, id)
	b.fill(`#create-form [name="title"]`, "Singles' Day rice cooker")
	b.fill(`#create-form [name="total"]`, "0")
	b.click(`#create-form button[type="submit"]`)
	b.waitTextIs(15*time.Second, `#create-form [data-error-for="total"]`, "must be an integer from 1 to 1000000000")
	if eval[string](b, `document.querySelector('#create-form [name="total"]').getAttribute("aria-invalid") || ""`) != "true" {
		b.fail("the refused field is not marked invalid")
	}
	b.screenshot("02-create-refused")
	if r := c.e.Do(http.MethodGet, "/v1/promotions/"+id+"/1", admintest.AdminToken, nil); r.Status != http.StatusNotFound {
		b.fail("a refused create created something: %s", r)
	}

	b.fill(`#create-form [name="total"]`, "1000")
	b.fill(`#create-form [name="perPinLimit"]`, "1")
	b.click(`#create-form button[type="submit"]`)
	b.waitTextIs(15*time.Second, "#status", "Created "+id+"/1.")
	b.waitTextIs(15*time.Second, row+` [data-cell="remaining"]`, "1,000")
	b.waitTextIs(15*time.Second, row+` [data-cell="state"]`, "ACTIVE")
	b.waitTextIs(15*time.Second, "#detail-title", id+" / 1")
	if s, _ := b.text(`#create-form [data-error-for="total"]`); s != "" {
		b.fail("the error of the refused create is still shown: %q", s)
	}

}

func (c *consoleRun) load() {
	b, id, key, row, shard := c.b, c.id, c.key, c.row, c.shard
	// Load: grabs straight into Redis; the page's live counter falls with them.
	done := make(chan error, 1)
	go func() { done <- grab(context.Background(), shard, key, id, buyers, 25*time.Millisecond) }()
	var seen []int64 // the distinct values the page showed, in order
	b.waitFor(30*time.Second, "the live counter falling, half the load in, with a grab rate shown", func() bool {
		s, _ := b.text(row + ` [data-cell="remaining"]`)
		n := parseInt(s)
		if len(seen) == 0 || seen[len(seen)-1] != n {
			seen = append(seen, n)
		}
		rate, _ := b.text(row + ` [data-cell="rate"]`)
		r, err := strconv.ParseFloat(rate, 64)
		return len(seen) >= 3 && n <= 1000-buyers/2 && err == nil && r > 0
	})
	b.waitFor(15*time.Second, "the chart drawn", func() bool {
		return eval[int](b, `document.querySelectorAll("#detail-chart path.line").length`) == 1
	})
	b.screenshot("03-under-load")
	if err := <-done; err != nil {
		b.fail("grab load: %v", err)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] >= seen[i-1] {
			b.fail("the live counter did not only fall while grabs ran: %v", seen)
		}
	}
	want := fmt.Sprintf("%d", 1000-buyers)
	b.waitTextIs(15*time.Second, row+` [data-cell="remaining"]`, want)
	b.waitTextIs(15*time.Second, "#detail-remaining", want)
	b.waitTextIs(15*time.Second, "#detail-granted", fmt.Sprint(buyers))
	if p := c.e.Do(http.MethodGet, "/v1/promotions/"+id+"/1", admintest.ViewerToken, nil).Promotion(); p.Remaining != 1000-buyers {
		b.fail("the API reads remaining %d", p.Remaining)
	}
	b.waitTextIs(15*time.Second, row+` [data-cell="rate"]`, "0.0") // the load is over

}

func (c *consoleRun) patch() {
	b, id, row := c.b, c.id, c.row
	// Patch: below what is granted is refused next to total; a valid total applies.
	b.fill("#patch-total", "100")
	b.click(`#patch-form button[type="submit"]`)
	b.waitTextIs(15*time.Second, `#patch-form [data-error-for="total"]`, fmt.Sprintf("total 100 is below the %d already granted", buyers))
	b.fill("#patch-total", "1500")
	b.click(`#patch-form button[type="submit"]`)
	b.waitTextIs(15*time.Second, "#status", "Changed "+id+"/1.")
	b.waitTextIs(15*time.Second, "#detail-of", "of 1,500")
	b.waitTextIs(15*time.Second, row+` [data-cell="remaining"]`, "1,260")
	if s, _ := b.text(`#patch-form [data-error-for="total"]`); s != "" {
		b.fail("the error of the refused patch is still shown: %q", s)
	}
	// The history shows the patch that landed, by whom, and not the refused one.
	b.waitText(15*time.Second, "#detail-history li:first-child", func(s string) bool {
		return strings.Contains(s, "PATCH by test-merchandiser (merchandiser): total") && strings.HasSuffix(s, "→ 1500")
	}, "the patch first in the history")
	if n := eval[int](b, `document.querySelectorAll("#detail-history li").length`); n != 2 {
		b.fail("the history shows %d entries after a create and a patch (one refused), want 2", n)
	}

}

func (c *consoleRun) stop() {
	b, id, key, row, shard := c.b, c.id, c.key, c.row, c.shard
	// Stop: the page shows STOPPED, and grabs are refused from then on.
	b.click("#stop-open")
	b.waitFor(15*time.Second, "the stop dialog", func() bool { return b.visible("#stop-dialog") })
	b.fill("#stop-reason", "price error")
	b.click(`#stop-form button[type="submit"]`)
	b.waitFor(15*time.Second, "the stop dialog closed", func() bool { return !b.visible("#stop-dialog") })
	b.waitTextIs(15*time.Second, row+` [data-cell="state"]`, "STOPPED")
	b.waitTextIs(15*time.Second, "#detail-state", "STOPPED")
	b.waitTextIs(15*time.Second, "#status", "Stopped "+id+"/1.")
	b.waitText(15*time.Second, "#detail-history li:first-child", func(s string) bool {
		return strings.Contains(s, "STOP by test-merchandiser (merchandiser): state ACTIVE → STOPPED")
	}, "the stop first in the history")
	if p := c.e.Do(http.MethodGet, "/v1/promotions/"+id+"/1", admintest.ViewerToken, nil).Promotion(); p.State != promo.Stopped {
		b.fail("the API shows state %s after the page stopped it", p.State)
	}
	rep, err := lua.Grab(context.Background(), shard, grabCall(key, id+"-late", "late-buyer"))
	if err != nil || rep.Code != lua.CodeStopped {
		b.fail("a grab after stop: %+v %v", rep, err)
	}
	if !eval[bool](b, `document.querySelector("#stop-open").disabled && document.querySelector("#patch-save").disabled`) ||
		!b.visible("#patch-locked") {
		b.fail("Stop or Save changes is still offered for a stopped promotion")
	}
	time.Sleep(1500 * time.Millisecond) // a poll or two: the counter stays
	b.waitTextIs(time.Second, row+` [data-cell="remaining"]`, "1,260")
	b.screenshot("04-stopped")

}

func (c *consoleRun) deleteAndSignOut() {
	b, id, row := c.b, c.id, c.row
	// Delete: the row leaves the list and the API no longer has the promotion.
	b.click("#delete-open")
	b.waitFor(15*time.Second, "the delete dialog", func() bool { return b.visible("#delete-dialog") })
	b.click(`#delete-form button[type="submit"]`)
	b.waitTextIs(15*time.Second, "#status", "Deleted "+id+"/1.")
	b.waitFor(15*time.Second, "the row gone", func() bool { _, found := b.text(row); return !found })
	if b.visible("#detail") {
		b.fail("the detail of a deleted promotion is still shown")
	}
	if r := c.e.Do(http.MethodGet, "/v1/promotions/"+id+"/1", admintest.AdminToken, nil); r.Status != http.StatusNotFound {
		b.fail("the API still has the deleted promotion: %s", r)
	}

	b.click("#sign-out")
	b.waitFor(15*time.Second, "the sign-in form after sign-out", func() bool { return b.visible("#sign-in") && !b.visible("#app") })
	if eval[string](b, `sessionStorage.getItem("flashsale.console.token") || ""`) != "" {
		b.fail("the token stays in sessionStorage after sign-out")
	}
	b.screenshot("05-signed-out")
}

// grab takes one unit for each of n buyers, one every pace, as grab-service would:
// q.lua takes, commit.lua commits (so no reconciler of the local stack settles them).
func grab(ctx context.Context, shard *redis.Client, key, id string, n int, pace time.Duration) error {
	tick := time.NewTicker(pace)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		rid := fmt.Sprintf("%s-r%d", id, i)
		rep, err := lua.Grab(ctx, shard, grabCall(key, rid, fmt.Sprintf("buyer-%d", i)))
		if err != nil || rep.Code != lua.CodeOK {
			return fmt.Errorf("grab %d: %+v %v", i, rep, err)
		}
		if c, err := lua.Commit(ctx, shard, rid, []string{key}); err != nil || c != lua.CommitCommitted {
			return fmt.Errorf("commit %d: %v %v", i, c, err)
		}
	}
	return nil
}

func grabCall(key, requestID, pin string) lua.GrabCall {
	now := time.Now()
	return lua.GrabCall{
		NowMs: now.UnixMilli(), DeadlineMs: now.Add(time.Minute).UnixMilli(),
		RequestID: requestID, BodyHash: "h", Pin: pin, IP: "192.0.2.1",
		RateFactorPermille: 1000, Items: []lua.GrabItem{{Key: key, Num: 1}},
	}
}

func parseInt(s string) int64 {
	n, err := strconv.ParseInt(strings.ReplaceAll(s, ",", ""), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// TestConsoleBuckets creates a promotion in buckets from the console: a count out
// of range is refused next to its field, and the detail view lists each bucket
// with its shard and, once read live, its stock.
func TestConsoleBuckets(t *testing.T) {
	t.Parallel()
	e, b, id := startSignedIn(t, admintest.Options{}, "console-k-")

	b.fillCreate(id, "10")
	b.fill(`#create-form [name="buckets"]`, "17")
	b.click(`#create-form button[type="submit"]`)
	b.waitTextIs(15*time.Second, `#create-form [data-error-for="buckets"]`, "must be an integer from 1 to 16")

	b.fill(`#create-form [name="buckets"]`, "3")
	b.click(`#create-form button[type="submit"]`)
	b.waitTextIs(15*time.Second, "#status", "Created "+id+"/1.")
	b.waitTextIs(15*time.Second, "#detail-title", id+" / 1")
	l := e.Layout(id, 1, 3)
	want := []string{"Buckets3", fmt.Sprintf("Bucket 0shard %d, 4 left", l.Shards[0]),
		fmt.Sprintf("Bucket 1shard %d, 3 left", l.Shards[1]), fmt.Sprintf("Bucket 2shard %d, 3 left", l.Shards[2])}
	b.waitText(15*time.Second, "#detail-facts", func(s string) bool {
		for _, w := range want {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	}, "every bucket with its shard and stock")
	b.screenshot("buckets-detail")
}

// TestConsoleEnvelopePool creates an envelope pool from the console: a budget too
// small for its envelopes is refused next to the budget, and the detail view shows
// the budget, the least envelope and the budget left, live from the shard.
func TestConsoleEnvelopePool(t *testing.T) {
	t.Parallel()
	e, b, id := startSignedIn(t, admintest.Options{}, "console-pool-")

	b.fillCreate(id, "10")
	b.fill(`#create-form [name="envelope.amount"]`, "99")
	b.fill(`#create-form [name="envelope.minAmount"]`, "10")
	b.click(`#create-form button[type="submit"]`)
	b.waitText(15*time.Second, `#create-form [data-error-for="envelope.amount"]`, func(s string) bool {
		return strings.Contains(s, "cannot give 10 envelopes at least 10 each")
	}, "the budget refused next to its field")

	b.fill(`#create-form [name="envelope.amount"]`, "5000")
	b.click(`#create-form button[type="submit"]`)
	b.waitTextIs(15*time.Second, "#status", "Created "+id+"/1.")
	b.waitTextIs(15*time.Second, "#detail-title", id+" / 1")
	b.waitText(15*time.Second, "#detail-facts", func(s string) bool {
		return strings.Contains(s, "Pool budget5,000") && strings.Contains(s, "Least envelope10") && strings.Contains(s, "Budget left5,000")
	}, "the pool's budget, least envelope and budget left")

	// An envelope handed out on the shard: the budget left follows, live.
	e.Take(id, 1, 0, "buyer", 1)
	amounts, _ := e.Pool(id, 1)
	var left int64
	for _, a := range amounts {
		left += a
	}
	want := "Budget left" + fmtInt(left)
	b.waitText(15*time.Second, "#detail-facts", func(s string) bool { return strings.Contains(s, want) }, "the budget left after an envelope: "+want)
	b.screenshot("pool-detail")
}

// fmtInt writes n as the console does (en-US grouping).
func fmtInt(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// startSignedIn is the set-up of a console test of one feature: an in-process
// promo-admin shaped by o, a headless browser signed in to its console as the
// merchandiser, and a fresh promotion id beginning with prefix.
func startSignedIn(t *testing.T, o admintest.Options, prefix string) (*admintest.Env, *browser, string) {
	t.Helper()
	e := admintest.Start(t, o)
	b := startBrowser(t, screenshotDir(t))
	b.signIn(e.Server.URL, admintest.AdminToken)
	return e, b, prefix + testenv.Suffix()
}

// signIn opens the console at base and signs in with token.
func (b *browser) signIn(base, token string) {
	b.t.Helper()
	b.run("open the console", chromedp.Navigate(base+"/console/"))
	b.waitFor(30*time.Second, "the sign-in form", func() bool { return b.visible("#sign-in") })
	b.fill("#token", token)
	b.click(`#sign-in button[type="submit"]`)
	b.waitFor(15*time.Second, "the console after sign-in", func() bool { return b.visible("#app") })
}

// fillCreate types a promotion id and its total into the create form.
func (b *browser) fillCreate(id, total string) {
	b.t.Helper()
	b.fill(`#create-form [name="promoId"]`, id)
	b.fill(`#create-form [name="total"]`, total)
}
