package rebuild

import (
	"testing"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
)

func TestLedgerEntryFromTheRecord(t *testing.T) {
	t.Parallel()
	grab := store.FlowRow{RequestID: "r", Pin: "p", IP: "i", Num: 2, BodyHash: "h"}
	for _, c := range []struct {
		name           string
		cancelled      bool
		reason         string
		state, wantWhy string
	}{
		{"granted", false, "", lua.LedgerCommitted, ""},
		{"cancelled by the buyer", true, "USER_CANCELLED", lua.LedgerReturned, "USER_CANCELLED"},
		{"cancel written before migration 0002", true, "", lua.LedgerReturned, ""},
		{"rollback of an aborted take", true, "ROLLBACK", lua.LedgerAbortRecorded, ""},
	} {
		want := lua.LedgerEntry{State: c.state, BodyHash: "h", Num: 2, Pin: "p", IP: "i", Reason: c.wantWhy}
		if have := ledgerEntry(grab, promo.PartAll, c.cancelled, c.reason); have != want {
			t.Errorf("%s: have %+v, want %+v", c.name, have, want)
		}
		// A part of a bucketed grab keeps its letters, as q.lua stores them.
		want.Part = "sp"
		if have := ledgerEntry(grab, "sp", c.cancelled, c.reason); have != want {
			t.Errorf("%s, part sp: have %+v, want %+v", c.name, have, want)
		}
	}
}
