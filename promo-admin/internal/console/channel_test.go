package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
)

// TestConsoleChannels creates a promotion sold on two channels from the console's
// create form: the row and the hash hold them and the detail view lists them.
func TestConsoleChannels(t *testing.T) {
	t.Parallel()
	e := admintest.Start(t, admintest.Options{})
	b := startBrowser(t, screenshotDir(t))
	id := "console-ch-" + testenv.Suffix()

	b.signInAsAdmin(e.Server.URL)

	b.fill(`#create-form [name="promoId"]`, id)
	b.fill(`#create-form [name="total"]`, "10")
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
