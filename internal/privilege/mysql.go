package privilege

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testenv"
)

// RootDSNEnv names the variable that overrides the server the MySQL tests use
// (default: root with no password at 127.0.0.1:3306, the test machine's MariaDB).
const RootDSNEnv = "FLASHSALE_PRIVILEGE_MYSQL_ROOT"

// MySQL is a throwaway database with mysql-grants.sql's users, each with a name
// of this run's own (users are server-wide) and its test password: root made the
// database and the migrator, the migrator ran the migrations, root granted the rest.
// The database and the users are dropped when the test ends.
type MySQL struct {
	t      testing.TB
	Root   *sqlx.DB
	DB     string
	server *mysql.Config
	prefix string
}

// StartMySQL sets the database and its users up.
func StartMySQL(t testing.TB) *MySQL {
	t.Helper()
	dsn := os.Getenv(RootDSNEnv)
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/"
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	root, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	sfx := testenv.Suffix()
	m := &MySQL{t: t, Root: root, DB: "pv_" + sfx + testenv.Suffix(), server: cfg, prefix: "flashsale_" + sfx + "_"}
	t.Cleanup(m.drop)
	before, after, err := MySQLGrants()
	if err != nil {
		t.Fatal(err)
	}
	m.exec(append([]string{"CREATE DATABASE `" + m.DB + "`"}, before...))
	if err := store.Migrate(context.Background(), m.DSN(MySQLMigrate), nil); err != nil {
		t.Fatalf("migrations as %s: %v", MySQLMigrate, err)
	}
	m.exec(after)
	return m
}

// exec runs statements as root, the placeholders filled in.
func (m *MySQL) exec(stmts []string) {
	m.t.Helper()
	for _, s := range stmts {
		s = strings.ReplaceAll(s, "${MYSQL_DATABASE}", m.DB)
		s = strings.ReplaceAll(s, "'flashsale_", "'"+m.prefix)
		for _, u := range []string{MySQLMigrate, MySQLGrab, MySQLAdmin, MySQLSink, MySQLRecovery} {
			s = strings.ReplaceAll(s, "${MYSQL_"+strings.ToUpper(role(u))+"_PASSWORD}", Password(u))
		}
		if _, err := m.Root.Exec(s); err != nil {
			m.t.Fatalf("%s: %v", s, err)
		}
	}
}

func role(user string) string { return strings.TrimPrefix(user, "flashsale_") }

func (m *MySQL) drop() {
	_, _ = m.Root.Exec("DROP DATABASE IF EXISTS `" + m.DB + "`")
	for _, u := range []string{MySQLMigrate, MySQLGrab, MySQLAdmin, MySQLSink, MySQLRecovery} {
		_, _ = m.Root.Exec("DROP USER IF EXISTS '" + m.User(u) + "'@'%'")
	}
	m.Root.Close()
}

// User is this run's name of user.
func (m *MySQL) User(user string) string { return m.prefix + role(user) }

// DSN connects as user to the database, in UTC as store.Connect does.
func (m *MySQL) DSN(user string) string {
	cfg := m.server.Clone()
	cfg.User, cfg.Passwd, cfg.DBName = m.User(user), Password(user), m.DB
	cfg.ParseTime, cfg.Loc = true, time.UTC
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	return cfg.FormatDSN()
}

// Store is the store as a service opens it in production: store.Connect as user,
// no DDL, closed when the test ends.
func (m *MySQL) Store(user string) *store.Store {
	m.t.Helper()
	s, err := store.Connect(context.Background(), m.DSN(user))
	if err != nil {
		m.t.Fatalf("store.Connect as %s: %v", user, err)
	}
	m.t.Cleanup(func() { s.Close() })
	return s
}

// IsDenied reports whether err is MySQL's refusal of a statement by the grants:
// on a table (1142), a column (1143) or the database (1044).
func IsDenied(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1142 || me.Number == 1143 || me.Number == 1044)
}

// RootDSN connects as root to the database: for the Redis tests, whose services
// need a record but whose MySQL rights are not what they test.
func (m *MySQL) RootDSN() string {
	cfg := m.server.Clone()
	cfg.DBName, cfg.ParseTime = m.DB, true
	return cfg.FormatDSN()
}
