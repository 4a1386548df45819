package store_test

import (
	"context"
	"testing"

	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
)

// Migration 0002 may run again (a crash between its ALTER and its record): it must
// then change nothing and fail nothing.
func TestFlowLedgerMigrationRunsTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.DB().ExecContext(ctx, "DELETE FROM schema_migrations WHERE version = 2"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = store.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("reopen with 0002 unrecorded: %v", err)
	}
	defer db.Close()
	var n int
	if err := db.DB().GetContext(ctx, &n, `SELECT COUNT(*) FROM information_schema.columns
 WHERE table_schema = DATABASE() AND table_name = 'grab_flow' AND column_name IN ('body_hash', 'reason')`); err != nil || n != 2 {
		t.Fatalf("grab_flow has %d of the 2 columns (%v)", n, err)
	}
}
