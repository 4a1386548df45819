package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// TestConsoleRemembers opens the console in headless Chromium at a promotion's
// address: its sale is drawn from the record (the flow log), with its sold-out
// time, and stays after a reload and after the sale ended; the switches card
// lists who changed the switches, on-call through the API by name and a write
// outside the API as such.
func TestConsoleRemembers(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "switches.json")
	e := admintest.Start(t, admintest.Options{Switches: configcenter.FileSource{Path: file, Interval: 20 * time.Millisecond}})
	b := startBrowser(t, screenshotDir(t))

	id := "remember-" + testenv.Suffix()
	p := e.Create(id) // total 100
	t0 := p.StartAt.Add(10 * time.Second).Truncate(time.Second)
	var events []flow.Event
	for i := range 100 { // sold out over 4 s, 3 units returned after
		events = append(events, sale(flow.Grab, fmt.Sprintf("%s-%d", id, i), id, t0.Add(time.Duration(i)*40*time.Millisecond)))
	}
	for i := range 3 {
		events = append(events, sale(flow.Cancel, fmt.Sprintf("%s-%d", id, i), id, t0.Add(5*time.Second)))
	}
	if _, err := e.App.Store.Flows.InsertFlows(context.Background(), events); err != nil {
		t.Fatal(err)
	}
	if r := e.Do(http.MethodPut, "/v1/switches", admintest.OnCallToken,
		`{"document": {"kafkaDegrade": true}, "ifMd5": "", "reason": "broker slow"}`); r.Status != http.StatusOK {
		t.Fatalf("on-call's change: %s", r)
	}

	b.run("open the console at the promotion", chromedp.Navigate(e.Server.URL+"/console/#promotion="+id+"/1"))
	b.waitFor(30*time.Second, "the sign-in form", func() bool { return b.visible("#sign-in") })
	b.fill("#token", admintest.AdminToken)
	b.click(`#sign-in button[type="submit"]`)
	c := rememberRun{b: b, id: id}
	c.saleShown("after sign-in")
	b.waitText(15*time.Second, "#switch-history", func(s string) bool {
		return strings.Contains(s, admintest.OnCallName+" (oncall)") && strings.Contains(s, "broker slow") && strings.Contains(s, "kafkaDegrade false → true")
	}, "on-call's change by name")
	b.screenshot("10-sale-from-the-record")

	// The sale ends; the page is reloaded: the same promotion, the same sale.
	e.Clock.Advance(25 * time.Hour)
	b.run("reload", chromedp.Reload())
	c.saleShown("after a reload of an ended sale")
	b.waitTextIs(15*time.Second, "#detail-state", "ENDED")

	// A write outside the API is listed as such.
	if err := os.WriteFile(file, []byte(`{"kafkaDegrade": false}`), 0o644); err != nil {
		t.Fatal(err)
	}
	b.waitText(15*time.Second, "#switch-history li", func(s string) bool {
		return strings.Contains(s, "outside the API") && strings.Contains(s, "kafkaDegrade true → false")
	}, "the outside change, newest first")
	b.screenshot("11-ended-sale-after-reload")
}

type rememberRun struct {
	b  *browser
	id string
}

// saleShown waits for the promotion's page with its sale drawn from the record.
func (c rememberRun) saleShown(when string) {
	b := c.b
	b.waitTextIs(15*time.Second, "#detail-title", c.id+" / 1")
	summary := b.waitText(15*time.Second, "#timeline-summary", func(s string) bool {
		return strings.HasPrefix(s, "100 granted, 3 returned of 100 (per second); sold out at ")
	}, "the sale's summary "+when)
	if !strings.Contains(summary, "3.96 s after the first grant") && !strings.Contains(summary, "4.0 s after the first grant") {
		b.fail("%s: sold-out time in %q", when, summary)
	}
	b.waitFor(15*time.Second, "the sale drawn "+when, func() bool {
		return eval[int](b, `document.querySelectorAll("#timeline-chart path.line.granted, #timeline-chart path.line.cancel, #timeline-chart line.sold-out").length`) == 3
	})
}

func sale(kind flow.Kind, rid, promoID string, at time.Time) flow.Event {
	e := flow.Event{EventID: string(kind) + "-" + rid, Kind: kind, RequestID: rid, Pin: "pin-" + rid, IP: "10.0.0.1",
		Items: []flow.Item{{PromoID: promoID, Type: 1, Num: 1, Shard: 3}}, OccurredAt: flow.Stamp(at)}
	if kind == flow.Grab {
		e.BodyHash = "h-" + rid
	} else {
		e.Reason = "USER_CANCELLED"
	}
	return e
}
