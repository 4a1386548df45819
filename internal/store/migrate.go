package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

var migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// Migration is one versioned schema change, migrations/NNNN_name.sql.
type Migration struct {
	Version    int
	Name       string
	Statements []string
}

// Migrations lists the embedded migrations in version order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("store: read migrations: %w", err)
	}
	var out []Migration
	seen := map[int]string{}
	for _, e := range entries {
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("store: migration file %s is not named NNNN_name.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("store: migrations %s and %s share version %d", prev, e.Name(), v)
		}
		seen[v] = e.Name()
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("store: read migration %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: v, Name: m[2], Statements: splitStatements(string(b))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// splitStatements cuts a migration into statements at each line ending in ';'.
// Lines starting with "--" are comments. The files are ours, so no statement puts
// a ';' at the end of a line inside a string.
func splitStatements(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// migrate applies, in order, every migration not yet recorded in schema_migrations.
// A named lock (GET_LOCK, held by one connection) serialises migrators that start
// at once against the same database: the second waits, then finds nothing to do.
func migrate(ctx context.Context, db *sqlx.DB, dbName string, progress func(string)) error {
	migrations, err := Migrations()
	if err != nil {
		return err
	}
	conn, err := db.Connx(ctx)
	if err != nil {
		return fmt.Errorf("store: migrate: %w", err)
	}
	defer conn.Close()
	release, err := lockMigrations(ctx, conn, dbName)
	if err != nil {
		return err
	}
	defer release()
	applied, err := appliedVersions(ctx, conn)
	if err != nil {
		return err
	}
	todo := pending(migrations, applied)
	progress(fmt.Sprintf("database %s: %d of %d migrations applied, %d to apply", dbName, len(migrations)-len(todo), len(migrations), len(todo)))
	for _, m := range todo {
		progress(fmt.Sprintf("applying %s (%d statements)", m, len(m.Statements)))
		start := time.Now()
		if err := apply(ctx, conn, m); err != nil {
			return err
		}
		progress(fmt.Sprintf("applied %s in %s", m, time.Since(start).Round(time.Millisecond)))
	}
	if len(migrations) > 0 {
		progress(fmt.Sprintf("database %s is at schema version %s", dbName, migrations[len(migrations)-1]))
	}
	return nil
}

// String is the migration's file name without .sql: 0003_flow_index_shard.
func (m Migration) String() string { return fmt.Sprintf("%04d_%s", m.Version, m.Name) }

// pending is the migrations not in applied, in order.
func pending(migrations []Migration, applied map[int]bool) []Migration {
	var out []Migration
	for _, m := range migrations {
		if !applied[m.Version] {
			out = append(out, m)
		}
	}
	return out
}

// ErrSchemaBehind is Connect's error when the database lacks a migration this
// binary embeds: the migrate job has not run since the binary was built.
var ErrSchemaBehind = errors.New("the schema is behind this binary: run the migrate job (recovery migrate, as the migrator user)")

// checkSchema checks that schema_migrations records every embedded migration. A
// version the binary does not know is no error: a newer binary migrated first, and
// migrations only add.
func checkSchema(ctx context.Context, db *sqlx.DB, dbName string) error {
	migrations, err := Migrations()
	if err != nil {
		return err
	}
	var versions []int
	if err := db.SelectContext(ctx, &versions, "SELECT version FROM schema_migrations"); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1146 {
			return fmt.Errorf("store: database %s has no schema_migrations table: %w", dbName, ErrSchemaBehind)
		}
		return fmt.Errorf("store: read schema_migrations of %s: %w", dbName, err)
	}
	applied := map[int]bool{}
	for _, v := range versions {
		applied[v] = true
	}
	if todo := pending(migrations, applied); len(todo) > 0 {
		more := ""
		if len(todo) > 1 {
			more = fmt.Sprintf(" and %d more", len(todo)-1)
		}
		return fmt.Errorf("store: database %s lacks migration %s%s: %w", dbName, todo[0], more, ErrSchemaBehind)
	}
	return nil
}

// lockMigrations takes the database's migration lock on conn and returns its release.
func lockMigrations(ctx context.Context, conn *sqlx.Conn, dbName string) (release func(), err error) {
	// GET_LOCK names are server-wide; the database name keeps test databases apart.
	lock := "flashsale.migrate." + dbName
	if len(lock) > 64 {
		lock = lock[:64]
	}
	var got *int
	if err := conn.QueryRowxContext(ctx, "SELECT GET_LOCK(?, ?)", lock, 60).Scan(&got); err != nil {
		return nil, fmt.Errorf("store: migrate: take lock %s: %w", lock, err)
	}
	if got == nil || *got != 1 {
		return nil, fmt.Errorf("store: migrate: lock %s not granted within 60s", lock)
	}
	return func() {
		// Release on a fresh context: the caller's may be done, the lock must go.
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = conn.ExecContext(rctx, "SELECT RELEASE_LOCK(?)", lock)
	}, nil
}

// appliedVersions creates schema_migrations if it is missing and reads the
// versions it records.
func appliedVersions(ctx context.Context, conn *sqlx.Conn) (map[int]bool, error) {
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
  version    INT NOT NULL PRIMARY KEY,
  name       VARCHAR(255) NOT NULL,
  applied_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`); err != nil {
		return nil, fmt.Errorf("store: migrate: create schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	rows, err := conn.QueryxContext(ctx, "SELECT version FROM schema_migrations")
	if err != nil {
		return nil, fmt.Errorf("store: migrate: read schema_migrations: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: migrate: read schema_migrations: %w", err)
		}
		applied[v] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: migrate: read schema_migrations: %w", err)
	}
	return applied, nil
}

// apply runs one migration and records it. MySQL commits DDL implicitly, so a
// migration is not one transaction: its statements are written to be re-runnable
// (IF NOT EXISTS) and the version is recorded only after the last one succeeded.
func apply(ctx context.Context, conn *sqlx.Conn, m Migration) error {
	for i, stmt := range m.Statements {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("store: migration %04d_%s statement %d: %w", m.Version, m.Name, i+1, err)
		}
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO schema_migrations (version, name) VALUES (?, ?)", m.Version, m.Name); err != nil {
		return fmt.Errorf("store: record migration %04d_%s: %w", m.Version, m.Name, err)
	}
	return nil
}
