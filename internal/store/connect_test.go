package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
)

// Connect runs no DDL: against a database the migrations have not reached it
// refuses, naming the first missing migration and the migrate job, and creates
// nothing; Migrate brings the schema up, reporting each step, and Connect then works.
func TestConnectChecksTheSchemaAndMigrateBringsItUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t) // an empty database
	db := rawDB(t, dsn)

	_, err := store.Connect(ctx, dsn)
	if !errors.Is(err, store.ErrSchemaBehind) || !strings.Contains(err.Error(), "run the migrate job") {
		t.Fatalf("connect to an empty database: got %v, want ErrSchemaBehind", err)
	}
	var tables int
	must(t, db.Get(&tables, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE()"))
	if tables != 0 {
		t.Fatalf("Connect created %d tables", tables)
	}

	var steps []string
	must(t, store.Migrate(ctx, dsn, func(s string) { steps = append(steps, s) }))
	migrations, err := store.Migrations()
	must(t, err)
	first, last := migrations[0], migrations[len(migrations)-1]
	log := strings.Join(steps, "\n")
	for _, want := range []string{"0 of ", "applying " + first.String(), "applied " + last.String(), "schema version " + last.String()} {
		if !strings.Contains(log, want) {
			t.Errorf("progress lacks %q:\n%s", want, log)
		}
	}

	s, err := store.Connect(ctx, dsn)
	must(t, err)
	s.Close()

	// The schema a step behind (a binary newer than the last migrate run).
	_, err = db.Exec("DELETE FROM schema_migrations WHERE version = ?", last.Version)
	must(t, err)
	_, err = store.Connect(ctx, dsn)
	if !errors.Is(err, store.ErrSchemaBehind) || !strings.Contains(err.Error(), last.String()) {
		t.Fatalf("connect with %s missing: got %v, want it named", last, err)
	}
	// A version the binary does not know (a newer binary migrated first) is fine.
	_, err = db.Exec("INSERT INTO schema_migrations (version, name) VALUES (?, ?), (9999, 'from_the_future')", last.Version, last.Name)
	must(t, err)
	s, err = store.Connect(ctx, dsn)
	must(t, err)
	s.Close()
}

// Connect never creates the database: that is the migrator's.
func TestConnectDoesNotCreateTheDatabase(t *testing.T) {
	t.Parallel()
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	must(t, err)
	absent := "t_absent_" + testenv.Suffix()
	cfg.DBName = absent
	if s, err := store.Connect(context.Background(), cfg.FormatDSN()); err == nil {
		s.Close()
		t.Fatal("Connect opened a database that does not exist")
	}
	cfg.DBName = ""
	db := rawDB(t, cfg.FormatDSN())
	var n int
	must(t, db.Get(&n, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", absent))
	if n != 0 {
		t.Fatalf("Connect created the database")
	}
}

func rawDB(t *testing.T, dsn string) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("mysql", dsn)
	must(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
