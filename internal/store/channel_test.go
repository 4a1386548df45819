package store_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
)

// The promotion row keeps its channels (migration 0016, a SET in the hash's bit
// order), and a pending change carries them until it is promoted.
func TestPromotionChannelsRoundTrip(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	sp := spec("CH", 10)
	sp.Channels = promo.Channels(promo.ChannelAPP | promo.ChannelQQ)
	p := create(t, s, sp, time.Now())
	got, err := s.Promotions.Get(ctx, p.ID())
	if err != nil || got.Spec.Channels != sp.Channels {
		t.Fatalf("get: channels %v (%v), want APP, QQ", got.Spec.Channels.Names(), err)
	}
	if n := scalar(t, s, "SELECT channels + 0 FROM promotion WHERE promo_id = 'CH'"); n != 5 {
		t.Errorf("channels + 0 = %d, want the bitmask 5", n)
	}
	next := got.Spec
	next.Channels = promo.Channels(promo.ChannelWeb)
	if _, err := s.Promotions.Update(ctx, p.ID(), func(p *store.Promotion) error {
		return p.Propose(store.OpPatch, next, promo.Active, time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	row, err := s.Promotions.Row(ctx, p.ID())
	if err != nil || row.Spec.Channels != sp.Channels || row.Pending == nil || row.Pending.Spec.Channels != next.Channels {
		t.Fatalf("pending: committed %v, pending %+v (%v)", row.Spec.Channels.Names(), row.Pending, err)
	}
	got, err = s.Promotions.Promote(ctx, p.ID(), 2, time.Now())
	if err != nil || got.Spec.Channels != next.Channels {
		t.Fatalf("promote: %v %v", got.Spec.Channels.Names(), err)
	}
	got, err = s.Promotions.Get(ctx, p.ID())
	if err != nil || got.Spec.Channels != next.Channels {
		t.Fatalf("after the patch: %v %v", got.Spec.Channels.Names(), err)
	}
	every := create(t, s, spec("CH-all", 10), time.Now())
	if got, err := s.Promotions.Get(ctx, every.ID()); err != nil || got.Spec.Channels != promo.EveryChannel {
		t.Fatalf("a promotion of every channel: %v %v", got.Spec.Channels.Names(), err)
	}
}

// flowChannel is grab_flow's (or another table's) channel of a row, "" for NULL.
func flowChannel(t *testing.T, s *store.Store, table, rid string, kind flow.Kind) string {
	t.Helper()
	var ch sql.NullString
	if err := s.DB().QueryRow("SELECT channel FROM "+table+" WHERE request_id = ? AND kind = ?", rid, string(kind)).Scan(&ch); err != nil {
		t.Fatalf("%s %s %s: %v", table, rid, kind, err)
	}
	return ch.String
}

// A GRAB's channel lands in grab_flow.channel (NULL without one), goes along when
// the rows move to the archive, and an early CANCEL moves in beside its GRAB.
func TestFlowRowsKeepTheGrabsChannel(t *testing.T) {
	t.Parallel()
	s := open(t)
	ctx := context.Background()
	end := time.Now().Add(-40 * 24 * time.Hour)
	sp := spec("CHF", 100)
	sp.StartAt, sp.EndAt = end.Add(-time.Hour), end
	p := create(t, s, sp, end.Add(-2*time.Hour))
	app := flowEvent(flow.Grab, "ch-app", "CHF", 1)
	app.Channel = "APP"
	web := flowEvent(flow.Grab, "ch-web", "CHF", 2)
	web.Channel = "WEB"
	none := flowEvent(flow.Grab, "ch-none", "CHF", 1)
	early := flowEvent(flow.Cancel, "ch-web", "CHF", 2) // before its GRAB: parked
	if _, err := s.Flows.InsertFlows(ctx, []flow.Event{early}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Flows.InsertFlows(ctx, []flow.Event{app, web, none}); err != nil || n != 3 {
		t.Fatalf("insert: %d rows (%v), want 3 GRABs (the early CANCEL moves in with its GRAB)", n, err)
	}
	for rid, want := range map[string]string{"ch-app": "APP", "ch-web": "WEB", "ch-none": ""} {
		if have := flowChannel(t, s, "grab_flow", rid, flow.Grab); have != want {
			t.Errorf("%s: channel %q, want %q", rid, have, want)
		}
	}
	if have := flowChannel(t, s, "grab_flow", "ch-web", flow.Cancel); have != "" {
		t.Errorf("the CANCEL has channel %q: a CANCEL's is its GRAB's", have)
	}
	// Finance's count of units sold by channel, net of cancels.
	rows, err := s.DB().Query(`SELECT COALESCE(g.channel, ''), SUM(CASE f.kind WHEN 'GRAB' THEN f.num ELSE -f.num END)
 FROM grab_flow f JOIN grab_flow g ON g.request_id = f.request_id AND g.kind = 'GRAB' AND g.promo_id = f.promo_id AND g.promo_type = f.promo_type
 WHERE f.promo_id = 'CHF' AND f.promo_type = 1 GROUP BY g.channel`)
	if err != nil {
		t.Fatal(err)
	}
	sold := map[string]int64{}
	for rows.Next() {
		var ch string
		var n int64
		if err := rows.Scan(&ch, &n); err != nil {
			t.Fatal(err)
		}
		sold[ch] = n
	}
	rows.Close()
	if sold["APP"] != 1 || sold["WEB"] != 0 || sold[""] != 1 {
		t.Errorf("sold by channel: %v", sold)
	}
	if n, err := s.Archive.MarkEnded(ctx, time.Now().Add(-30*24*time.Hour)); err != nil || n != 1 {
		t.Fatalf("mark: %d %v", n, err)
	}
	if _, err := s.Archive.MoveFlows(ctx, p.ID(), 100); err != nil {
		t.Fatal(err)
	}
	if have := flowChannel(t, s, "grab_flow_archive", "ch-app", flow.Grab); have != "APP" {
		t.Errorf("archived GRAB: channel %q, want APP", have)
	}
}
