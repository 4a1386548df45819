package grab

import (
	"strings"
	"testing"

	"github.com/flashsale/platform/lua"
)

// A replay is decided by the states of all the request's parts, whatever the order
// of their shards: a grab rolled back after one part committed holds an aborted
// entry on one shard and a cancelled one on the other, and must read as rolled
// back from either side, not as granted and returned.
func TestReplayStatesDecideByPrecedence(t *testing.T) {
	var s Grabber
	req := Request{RequestID: "r", Items: []Item{{PromoID: "a", Type: 1, Num: 1}, {PromoID: "b", Type: 1, Num: 1}}}
	const (
		P, G, A, X, C, R = lua.LedgerPending, lua.LedgerCommitted, lua.LedgerAborted, lua.LedgerAbortRecorded, lua.LedgerCancelled, lua.LedgerReturned
	)
	for _, c := range []struct {
		states []string
		want   Outcome
		says   string
		d      Decision
	}{
		{[]string{G, G}, Granted, "replay", ""},
		{[]string{R, X}, Unavailable, "rolled back", RolledBack},
		{[]string{X, R}, Unavailable, "rolled back", RolledBack},
		{[]string{C, A}, Unavailable, "rolled back", RolledBack},
		{[]string{R, R}, AlreadyReturned, "since been returned", ""},
		{[]string{G, C}, AlreadyReturned, "since been returned", ""},
		{[]string{X, P}, Unavailable, "still being committed", Undecided},
	} {
		got := s.replay(req, c.states, nil)
		if got.Result != c.want || !strings.Contains(got.Message, c.says) || got.Decision != c.d {
			t.Errorf("states %v: %s %q %q, want %s saying %q, decision %q", c.states, got.Result, got.Message, got.Decision, c.want, c.says, c.d)
		}
	}
}
