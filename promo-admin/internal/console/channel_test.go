package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// TestConsoleChannels creates a promotion sold on two channels from the console's
// create form: the row and the hash hold them and the detail view lists them.
func TestConsoleChannels(t *testing.T) {
	t.Parallel()
	e, b, id := startSignedIn(t, admintest.Options{}, "console-ch-")

	b.fillCreate(id, "10")
	b.click(`#create-form input[name="channel"][value="APP"]`)
	b.click(`#create-form input[name="channel"][value="WEB"]`)
	b.click(`#create-form button[type="submit"]`)
	b.waitTextIs(15*time.Second, "#status", "Created "+id+"/1.")
	b.waitText(15*time.Second, "#detail-facts", func(s string) bool {
		return strings.Contains(s, "ChannelsAPP, WEB")
	}, "the channels in the detail view")
	if h, _ := e.Hash(id, 1); h.Channels != promo.Channels(promo.ChannelAPP|promo.ChannelWeb) {
		t.Errorf("hash channels %v", h.Channels.Names())
	}
	b.screenshot("channels-detail")
}

// TestConsolePatchChannels changes a promotion's channels through the change
// form: the page sends channels only when the ticks changed, the API and the
// hash follow, "Every channel" sells everywhere again, and a channel the service
// refuses shows the service's 400 message by the channels, nothing changed.
func TestConsolePatchChannels(t *testing.T) {
	t.Parallel()
	e, b, id := startSignedIn(t, admintest.Options{}, "console-pch-")
	c := patchChannelsRun{e: e, b: b, id: id, row: fmt.Sprintf(`tr[data-key="%s/1"]`, id)}
	e.Create(id)
	c.open()

	// A change of total alone sends no channels.
	b.fill("#patch-total", "150")
	b.click(`#patch-form button[type="submit"]`)
	b.waitTextIs(15*time.Second, "#detail-of", "of 150")
	c.sent(map[string]any{"total": float64(150)})

	b.click(`#patch-form input[name="channel"][value="APP"]`)
	b.click(`#patch-form input[name="channel"][value="QQ"]`)
	if eval[bool](b, `document.querySelector("#patch-every-channel").checked`) {
		b.fail(`"Every channel" stays ticked beside APP and QQ`)
	}
	b.click(`#patch-form button[type="submit"]`)
	c.shown([]string{"APP", "QQ"}, "APP, QQ", "Sold on APP, QQ")
	c.sent(map[string]any{"channels": []any{"APP", "QQ"}})
	b.waitText(15*time.Second, "#detail-history li:first-child", func(s string) bool {
		return strings.HasSuffix(s, "channels every channel → APP, QQ")
	}, "the channels' change first in the history")
	b.screenshot("channels-patched")

	// "Every channel" clears the others and sends [].
	b.click("#patch-every-channel")
	if n := eval[int](b, `document.querySelectorAll('#patch-form input[name="channel"]:checked').length`); n != 0 {
		b.fail(`"Every channel" left %d channels ticked`, n)
	}
	b.click(`#patch-form button[type="submit"]`)
	c.shown(nil, "every channel", "")
	c.sent(map[string]any{"channels": []any{}})

	c.refused()
}

// patchChannelsRun is TestConsolePatchChannels' promotion, changed in b.
type patchChannelsRun struct {
	e       *admintest.Env
	b       *browser
	id, row string
}

// open lists the promotion, opens it, and records every PATCH body the page sends.
func (c patchChannelsRun) open() {
	b := c.b
	b.click("#refresh")
	b.waitFor(15*time.Second, "the promotion listed", func() bool { return b.visible(c.row) })
	b.click(c.row + " button.link")
	b.waitTextIs(15*time.Second, "#detail-title", c.id+" / 1")
	b.waitText(15*time.Second, "#detail-facts", func(s string) bool { return strings.Contains(s, "Channelsevery channel") },
		"every channel in the detail view")
	if !eval[bool](b, `document.querySelector("#patch-every-channel").checked`) {
		b.fail(`"Every channel" is not ticked for a promotion sold everywhere`)
	}
	if b.visible("#approvals") || b.visible("#detail-pending") {
		b.fail("the approval queue is shown by a promo-admin that requires no approval")
	}
	eval[bool](b, `(() => { window.sentPatches = []; const f = window.fetch;
		window.fetch = (u, i) => { if (i && i.method === 'PATCH') window.sentPatches.push(i.body); return f(u, i); }; return true })()`)
}

// sent checks the last PATCH body the page sent.
func (c patchChannelsRun) sent(want map[string]any) {
	c.b.t.Helper()
	bodies := eval[[]string](c.b, `window.sentPatches`)
	if len(bodies) == 0 {
		c.b.fail("no PATCH sent")
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(bodies[len(bodies)-1]), &got); err != nil || !reflect.DeepEqual(got, want) {
		c.b.fail("the page sent %s, want %v", bodies[len(bodies)-1], want)
	}
}

// shown waits for the page to show the channels (facts in the detail view, cell
// in the list's row), then checks the API and the hash hold names.
func (c patchChannelsRun) shown(names []string, facts, cell string) {
	b := c.b
	b.t.Helper()
	b.waitTextIs(15*time.Second, "#status", "Changed "+c.id+"/1.")
	b.waitText(15*time.Second, "#detail-facts", func(s string) bool { return strings.Contains(s, "Channels"+facts+"Created") },
		"the detail view's channels: "+facts)
	b.waitTextIs(15*time.Second, c.row+` [data-cell="channels"]`, cell)
	p := c.e.Do(http.MethodGet, "/v1/promotions/"+c.id+"/1", admintest.ViewerToken, nil).Promotion()
	if got := p.Channels.Names(); !reflect.DeepEqual(got, names) && len(got)+len(names) > 0 {
		b.fail("the API shows channels %v, want %v", got, names)
	}
	c.e.Agree(c.id, 1)
}

// refused ticks a channel the service does not know (a page older than the
// service's list): the service's message is shown by the channels, and nothing
// changes.
func (c patchChannelsRun) refused() {
	b, e := c.b, c.e
	r := e.Do(http.MethodPatch, "/v1/promotions/"+c.id+"/1", admintest.AdminToken, `{"channels": ["SMS"]}`)
	want := r.Error()
	if r.Status != http.StatusBadRequest || want.Field != "channels[0]" || want.Message == "" {
		b.fail("the API's answer to an unknown channel: %s", r)
	}
	before := e.Snapshot(store.ID{PromoID: c.id, Type: 1})
	eval[bool](b, `(() => { document.querySelector('#patch-form input[name="channel"][value="WEB"]').value = "SMS"; return true })()`)
	b.click(`#patch-form input[name="channel"][value="SMS"]`)
	b.click(`#patch-form button[type="submit"]`)
	b.waitTextIs(15*time.Second, `#patch-form [data-error-for="channels"]`, want.Message)
	c.sent(map[string]any{"channels": []any{"SMS"}})
	if s, _ := b.text("#status"); s != "Changed "+c.id+"/1." {
		b.fail("the status changed on a refusal: %q", s)
	}
	if after := e.Snapshot(store.ID{PromoID: c.id, Type: 1}); after != before {
		b.fail("a refused change changed something:\n%s\n%s", before, after)
	}
	b.screenshot("channels-refused")
}
