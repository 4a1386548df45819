package privilege_test

import (
	"context"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/privilege"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/store"
)

func spec(id string, total int64) promo.Spec {
	start := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	return promo.Spec{PromoID: id, Type: 1, Title: "t " + id, Total: total, PerPinLimit: 2, PerIPLimit: 5,
		MaxPerGrab: 1, StartAt: start, EndAt: start.Add(time.Hour)}
}

func event(kind flow.Kind, rid, promoID string) flow.Event {
	e := flow.Event{EventID: string(kind) + "-" + rid, Kind: kind, RequestID: rid, Pin: "pin-" + rid, IP: "10.0.0.1",
		Items: []flow.Item{{PromoID: promoID, Type: 1, Num: 1, Shard: 3}}, OccurredAt: flow.Stamp(time.Now())}
	if kind == flow.Grab {
		e.BodyHash, e.HoldUntil = "h-"+rid, time.Now().Add(time.Hour).UnixMilli()
	} else {
		e.Reason = "USER_CANCELLED"
	}
	return e
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// refused checks that each statement, run as the store's user, is refused by the grants.
func refused(t *testing.T, s *store.Store, user string, stmts ...string) {
	t.Helper()
	for _, q := range stmts {
		if _, err := s.DB().Exec(q); !privilege.IsDenied(err) {
			t.Errorf("%s ran %q: got %v, want a refusal (1142/1143)", user, q, err)
		}
	}
}

// promo-admin's writes and reads, as flashsale_admin: a pool created, promoted,
// changed and stopped, a create discarded, the list, the audit trail, the split.
func adminWork(t *testing.T, s *store.Store) {
	ctx, now := context.Background(), time.Now()
	for _, id := range []string{"A", "B"} {
		must(t, "insert "+id, s.Promotions.Insert(ctx, store.NewPromotion(spec(id, 10), promo.Active, now)))
		_, err := s.Promotions.Promote(ctx, store.ID{PromoID: id, Type: 1}, 1, now)
		must(t, "promote "+id, err)
	}
	pool := spec("POOL", 4)
	pool.Envelope = &promo.Envelope{Amount: 40, MinAmount: 1}
	p := store.NewPromotion(pool, promo.Active, now)
	must(t, "insert pool", s.Promotions.InsertPool(ctx, p, []int64{10, 10, 10, 10}))
	_, err := s.Promotions.EnvelopeParts(ctx, p.ID())
	must(t, "envelope parts", err)
	_, err = s.Promotions.Pending(ctx, now.Add(time.Minute), 10)
	must(t, "pending", err)
	must(t, "discard", s.Promotions.Discard(ctx, p.ID(), 1))
	id := store.ID{PromoID: "A", Type: 1}
	row, err := s.Promotions.Update(ctx, id, func(p *store.Promotion) error {
		return p.Propose(store.OpStop, p.Spec, promo.Stopped, now)
	})
	must(t, "propose a stop", err)
	_, err = s.Promotions.Promote(ctx, id, row.Version+1, now)
	must(t, "promote the stop", err)
	_, err = s.Promotions.Get(ctx, id)
	must(t, "get", err)
	_, err = s.Promotions.List(ctx, store.ListQuery{Now: now})
	must(t, "list", err)
	_, err = s.Promotions.History(ctx, id, 10)
	must(t, "history", err)
}

// flowWork is what the degrade path and the flow sink write: a CANCEL before its
// GRAB (parked, then adopted), GRABs with holds, a CONFIRM, and the reads after.
func flowWork(t *testing.T, s *store.Store, rid string) {
	ctx := context.Background()
	_, err := s.Flows.InsertFlows(ctx, []flow.Event{event(flow.Cancel, rid+"-1", "B")})
	must(t, "insert an early CANCEL", err)
	_, err = s.Flows.InsertFlows(ctx, []flow.Event{event(flow.Grab, rid+"-1", "B"), event(flow.Grab, rid+"-2", "B")})
	must(t, "insert GRABs", err)
	_, err = s.Flows.InsertFlows(ctx, []flow.Event{event(flow.Confirm, rid+"-2", "B")})
	must(t, "insert a CONFIRM", err)
	_, err = s.Flows.HasGrab(ctx, rid+"-2", "B", 1)
	must(t, "has grab", err)
	_, _, _, err = s.Flows.GrabItems(ctx, rid+"-2")
	must(t, "grab items", err)
	_, err = s.Flows.Granted(ctx, rid+"-2", "B", 1)
	must(t, "granted", err)
}

// rebuildReads is what rebuild and verify read of the record.
func rebuildReads(t *testing.T, s *store.Store) {
	ctx, id := context.Background(), store.ID{PromoID: "B", Type: 1}
	_, err := s.Rebuild.LivePromotions(ctx)
	must(t, "live promotions", err)
	_, err = s.Rebuild.PendingChanges(ctx)
	must(t, "pending changes", err)
	_, err = s.Rebuild.FlowCounters(ctx, id)
	must(t, "flow counters", err)
	must(t, "each flow", s.Rebuild.EachFlow(ctx, id, func(store.FlowRow) error { return nil }))
	_, err = s.Rebuild.GrabRows(ctx, id, []string{"x"})
	must(t, "grab rows", err)
	must(t, "each index entry", s.Rebuild.EachIndexEntry(ctx, 3, time.Now().Add(-time.Hour), func(store.IndexEntry) error { return nil }))
	_, _, err = s.Rebuild.EnvelopePool(ctx, id)
	must(t, "envelope pool", err)
	_, _, err = s.Rebuild.EnvelopeSplit(ctx, id)
	must(t, "envelope split", err)
	_, err = s.Rebuild.DeadLettered(ctx)
	must(t, "dead lettered", err)
	_, err = s.Flows.Holds(ctx, 3, time.Now().Add(-time.Hour))
	must(t, "holds", err)
	_, err = s.Flows.GrantedByRecord(ctx, "B", 1)
	must(t, "granted by record", err)
}

// Each service's store calls succeed as its own user, and a statement outside its
// grants is refused: deploy/security/mysql-grants.sql against a real server.
func TestMySQLGrantsHoldEachServicesStatements(t *testing.T) {
	m := privilege.StartMySQL(t)
	ctx := context.Background()

	admin := m.Store(privilege.MySQLAdmin)
	adminWork(t, admin)
	refused(t, admin, privilege.MySQLAdmin, "DELETE FROM grab_flow", "INSERT INTO owed_cancel (request_id) VALUES ('x')",
		"CREATE TABLE x (a INT)", "ALTER TABLE promotion ADD COLUMN x INT", "DROP TABLE promotion_audit")

	grab := m.Store(privilege.MySQLGrab)
	flowWork(t, grab, "g")
	must(t, "owe cancels", grab.Flows.OweCancels(ctx, []flow.Event{event(flow.Cancel, "g-2", "B")}))
	_, err := grab.Keys.PromotionKeys(ctx)
	must(t, "promotion keys", err)
	_, err = grab.Keys.PromotionKeysEndingAfter(ctx, time.Now())
	must(t, "promotion keys ending after", err)
	_, err = grab.Keys.PromotionKeysEndedBetween(ctx, time.Now().Add(-time.Hour), time.Now())
	must(t, "promotion keys ended between", err)
	refused(t, grab, privilege.MySQLGrab, "DELETE FROM grab_flow", "UPDATE promotion SET total = 1",
		"DELETE FROM owed_cancel", "INSERT INTO promotion_audit (promo_id) VALUES ('x')", "CREATE TABLE x (a INT)")

	sink := m.Store(privilege.MySQLSink)
	flowWork(t, sink, "s")
	must(t, "dead letters", sink.Flows.RecordDeadLetters(ctx, []store.DeadLetter{{Source: "t/0@1", RequestID: "d", Kind: "GRAB", ID: store.ID{PromoID: "B", Type: 1}, Cause: "test"}}))
	_, err = sink.Flows.SettleOwedCancels(ctx, time.Hour)
	must(t, "settle owed cancels", err)
	rebuildReads(t, sink)
	refused(t, sink, privilege.MySQLSink, "DELETE FROM grab_flow", "UPDATE promotion SET state = 'DELETED'",
		"INSERT INTO promotion_audit (promo_id) VALUES ('x')", "TRUNCATE TABLE flow_dead_letter")

	rec := m.Store(privilege.MySQLRecovery)
	rebuildReads(t, rec)
	_, err = rec.Flows.SettleOwedCancels(ctx, time.Hour)
	must(t, "settle owed cancels", err)
	var got int
	must(t, "the healer's lock", rec.DB().Get(&got, "SELECT GET_LOCK('flashsale.privilege.test', 1)"))
	archiveWork(t, rec)
	refused(t, rec, privilege.MySQLRecovery, "INSERT INTO flow_dead_letter (source) VALUES ('x')",
		"DELETE FROM promotion", "UPDATE grab_flow SET num = 0", "UPDATE promotion SET total = 1",
		"DELETE FROM grab_flow_archive", "UPDATE grab_flow_archive SET num = 0")
}

// A service's user connects to the migrated record (store.Connect, no DDL) but
// cannot run the migrations: creating the database and the tables is the migrator's
// alone. And each refuses what the migrations run, statement by statement.
func TestServiceConnectsButCannotMigrate(t *testing.T) {
	m := privilege.StartMySQL(t)
	ctx := context.Background()
	migrations, err := store.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{privilege.MySQLGrab, privilege.MySQLAdmin, privilege.MySQLSink, privilege.MySQLRecovery} {
		s, err := store.Connect(ctx, m.DSN(u))
		if err != nil {
			t.Errorf("%s: store.Connect: %v", u, err)
		} else {
			s.Close()
		}
		if err := store.Migrate(ctx, m.DSN(u), nil); !privilege.IsDenied(err) {
			t.Errorf("%s: store.Migrate: got %v, want a refusal by the grants", u, err)
		}
		s = m.Store(u)
		refused(t, s, u, migrations[0].Statements[0], "INSERT INTO schema_migrations (version, name) VALUES (9999, 'x')",
			"ALTER TABLE grab_flow ADD COLUMN x INT", "CREATE INDEX x ON grab_flow (num)", "DROP TABLE schema_migrations")
	}
}

// archiveWork runs recovery archive's store calls: a promotion ended long ago is
// marked, its rows moved, settled holds purged.
func archiveWork(t *testing.T, s *store.Store) {
	t.Helper()
	ctx := context.Background()
	cutoff := time.Now().Add(time.Hour) // everything made above has ended by then
	_, err := s.Archive.MarkEnded(ctx, cutoff)
	must(t, "mark ended", err)
	left, err := s.Archive.ArchivedRows(ctx)
	must(t, "archived rows", err)
	for id := range left {
		_, err := s.Archive.MoveFlows(ctx, id, 100)
		must(t, "move flows of "+id.String(), err)
	}
	_, err = s.Archive.PurgeHolds(ctx, cutoff, 100)
	must(t, "purge holds", err)
}
