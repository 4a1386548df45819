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

// The rebuild's short cut past the address parser keys every ip as
// promo.IPCounterKey does: the colon-free strings (IPv4, malformed, empty) as
// themselves, the rest by the parser.
func TestIPCounterKeyAgreesWithThePromoPackage(t *testing.T) {
	for _, ip := range []string{"198.18.1.2", "0.0.0.0", "255.255.255.255", "01.2.3.4", "1.2.3.256", "1.2.3", "1.2.3.4.5",
		"1.2.3.4%eth0", "", "not-an-ip", " 1.2.3.4", "::ffff:10.0.0.1", "2001:db8:1:2:3:4:5:6", "2001:DB8::1", "fe80::1%eth0", "::"} {
		if have, want := ipCounterKey(ip), promo.IPCounterKey(ip); have != want {
			t.Errorf("ipCounterKey(%q) = %q, promo.IPCounterKey %q", ip, have, want)
		}
	}
}
