package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// Sentinel errors. Every error the store returns wraps the operation and its cause;
// test for these with errors.Is.
var (
	ErrNotFound  = errors.New("not found")
	ErrExists    = errors.New("already exists")
	ErrBusy      = errors.New("another change of this promotion is pending")
	ErrNoPending = errors.New("no pending change of that version")
	ErrBadCursor = errors.New("malformed cursor")
)

// Store is the MySQL/MariaDB system of record, opened once: each field is the
// type of the tables one kind of caller uses, all on one pool. It is safe for
// concurrent use.
type Store struct {
	// Flows is the flow log (grab_flow) with what its writes carry along: the
	// holds (grab_hold) and the owed CANCELs (owed_cancel).
	Flows *Flows
	// Promotions is the promotion table with its journal, audit trail and
	// envelope splits: promo-admin's side.
	Promotions *Promotions
	// Rebuild is the record as a shard rebuild and verify read it.
	Rebuild *Rebuild
	// Keys lists the promotion hash keys the shards hold: grab-service's fence
	// and reconciler.
	Keys *Keys
	// Archive moves the flow rows of promotions ended long ago out of grab_flow.
	Archive *Archive

	db *sqlx.DB
}

// Open is Migrate then Connect: the local stack's and the tests' way in, as a user
// that may run the migrations. A service in production connects as its own user
// with Connect, after the migrate job (recovery migrate) ran as the migrator.
func Open(ctx context.Context, dsn string) (*Store, error) {
	if err := Migrate(ctx, dsn, nil); err != nil {
		return nil, err
	}
	return Connect(ctx, dsn)
}

// OpenWith is Open when migrate is set, else Connect: the services' --mysql-migrate.
func OpenWith(ctx context.Context, dsn string, migrate bool) (*Store, error) {
	if migrate {
		return Open(ctx, dsn)
	}
	return Connect(ctx, dsn)
}

// Connect opens dsn (go-sql-driver form, database name required) and runs no DDL:
// it pings the server and checks that every migration this binary embeds was
// applied, so a service runs as a user without CREATE or ALTER and never against a
// schema older than its code. Every connection works in UTC: times are sent and
// read as UTC and the session time zone is +00:00, so DATETIME columns hold UTC.
func Connect(ctx context.Context, dsn string) (*Store, error) {
	cfg, err := utcConfig(dsn)
	if err != nil {
		return nil, err
	}
	db, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := checkSchema(ctx, db, cfg.DBName); err != nil {
		db.Close()
		return nil, err
	}
	return &Store{Flows: &Flows{db: db}, Promotions: &Promotions{db: db}, Rebuild: &Rebuild{db: db}, Keys: &Keys{db: db}, Archive: &Archive{db: db}, db: db}, nil
}

// Migrate creates the database if it is missing and applies, in order, the
// embedded migrations not yet applied; progress, when not nil, hears of each step.
// It needs the migrator's rights (deploy/security/mysql-grants.sql).
func Migrate(ctx context.Context, dsn string, progress func(string)) error {
	if progress == nil {
		progress = func(string) {}
	}
	cfg, err := utcConfig(dsn)
	if err != nil {
		return err
	}
	if err := createDatabase(ctx, cfg); err != nil {
		return err
	}
	db, err := connect(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	return migrate(ctx, db, cfg.DBName, progress)
}

// connect opens a pool on cfg and pings it.
func connect(ctx context.Context, cfg *mysql.Config) (*sqlx.DB, error) {
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", cfg.DBName, err)
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(8)
	db.SetConnMaxLifetime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("store: connect %s: %w", cfg.DBName, err)
	}
	return db, nil
}

// utcConfig parses dsn and sets it to read and write times in UTC.
func utcConfig(dsn string) (*mysql.Config, error) {
	// The CA's config must be registered before ParseDSN, which checks tls= names.
	caFile, err := registerTLS()
	if err != nil {
		return nil, err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil && caFile == "" && strings.Contains(dsn, "tls="+TLSName) {
		return nil, errors.New("store: the dsn says tls=" + TLSName + " but " + CAEnv + " is not set")
	}
	if err != nil {
		return nil, fmt.Errorf("store: parse dsn: %w", err)
	}
	if cfg.DBName == "" {
		return nil, errors.New("store: the dsn names no database")
	}
	if err := useTLS(cfg, caFile); err != nil {
		return nil, err
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	return cfg, nil
}

func createDatabase(ctx context.Context, cfg *mysql.Config) error {
	server := cfg.Clone()
	server.DBName = ""
	db, err := sqlx.Open("mysql", server.FormatDSN())
	if err != nil {
		return fmt.Errorf("store: open server: %w", err)
	}
	defer db.Close()
	q := "CREATE DATABASE IF NOT EXISTS " + quoteIdent(cfg.DBName) +
		" CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("store: create database %s: %w", cfg.DBName, err)
	}
	return nil
}

func quoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// DB is the underlying handle, for the packages that share the database
// (the flow log) and for tests.
func (s *Store) DB() *sqlx.DB { return s.db }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	return nil
}

// Close closes the connection pool.
func (s *Store) Close() error {
	s.Flows.stmts.close()
	return s.db.Close()
}

// isDuplicate reports whether err is MySQL's duplicate-key error (1062).
func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// commit commits tx, or gives up when ctx ends first. database/sql runs a COMMIT
// without the context, so a server that stops answering mid-COMMIT would hold the
// caller until TCP gave up; given up, the COMMIT may still land later, which is why
// every write here is safe to retry (InsertFlows skips rows already present, an
// admin change is journaled and resolved).
func commit(ctx context.Context, tx *sqlx.Tx) error {
	done := make(chan error, 1)
	go func() { done <- tx.Commit() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("commit given up: %w", ctx.Err())
	}
}
