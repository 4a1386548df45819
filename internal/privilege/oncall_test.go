package privilege_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/privilege"
	"github.com/flashsale/platform/internal/store"
)

// promo-admin's switch history and timeline, as flashsale_admin: a change
// recorded and resolved, a version found in force recorded, the history paged, a
// promotion's timeline read over the live and archived flow log; and what the
// grants leave out refused (a change's record rewritten or removed, the flow log
// written).
func TestMySQLGrantsHoldPromoAdminsSwitchHistoryAndTimeline(t *testing.T) {
	m := privilege.StartMySQL(t)
	ctx, now := context.Background(), time.Now()
	admin := m.Store(privilege.MySQLAdmin)
	h := store.NewSwitchHistory(admin.DB())
	id, err := h.Record(ctx, store.SwitchChange{At: now, Actor: store.Actor{Name: "alice", Role: "oncall"}, Via: store.SwitchViaAPI,
		Outcome: store.SwitchUnconfirmed, Store: "file:x", AfterMD5: "m1", AfterDoc: []byte(`{}`)})
	must(t, "record a switch change", err)
	must(t, "resolve it", h.Resolve(ctx, id, store.SwitchApplied))
	_, _, err = h.Observe(ctx, store.Sighting{At: now, Store: "file:x", MD5: "m2", Doc: []byte(`{"grabEnabled":false}`), Since: id,
		Changes: func([]byte) (json.RawMessage, error) { return json.RawMessage(`[]`), nil }})
	must(t, "observe a version written outside the API", err)
	_, err = h.Page(ctx, "", 10)
	must(t, "page the switch history", err)

	sink := m.Store(privilege.MySQLSink)
	_, err = sink.Flows.InsertFlows(ctx, []flow.Event{event(flow.Grab, "tl-1", "TL")})
	must(t, "insert a flow", err)
	_, err = admin.Promotions.Timeline(ctx, store.ID{PromoID: "TL", Type: 1}, 1)
	must(t, "timeline", err)

	refused(t, admin, privilege.MySQLAdmin, "UPDATE switch_history SET actor = 'mallory'", "DELETE FROM switch_history",
		"UPDATE switch_history SET after_doc = '{}'", "INSERT INTO grab_flow_archive (event_id) VALUES ('x')")
}
