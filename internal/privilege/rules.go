// Package privilege loads the least-privilege rules of deploy/security (the Redis
// ACL users, the MySQL grants) and sets up real servers under them, so each
// service's tests can run its code as its own user and show both that the rules
// let it work and that they refuse the rest (deploy/security/README.md).
package privilege

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// The Redis users of deploy/security/redis-acl.conf.
const (
	RedisGrab     = "grab-service"
	RedisAdmin    = "promo-admin"
	RedisRecovery = "recovery"
	RedisExporter = "redis-exporter"
)

// The MySQL users of deploy/security/mysql-grants.sql.
const (
	MySQLMigrate  = "flashsale_migrate"
	MySQLGrab     = "flashsale_grab"
	MySQLAdmin    = "flashsale_admin"
	MySQLSink     = "flashsale_sink"
	MySQLRecovery = "flashsale_recovery"
)

// AfterMigrations marks, in mysql-grants.sql, where the statements that name
// tables begin: they run once the migrations made the tables.
const AfterMigrations = "-- @after-migrations"

// Dir is deploy/security of this checkout.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy", "security")
}

// RedisUser is one "user" line of redis-acl.conf.
type RedisUser struct {
	Name string
	// Rules are the line's rules after the name, the password placeholder among them.
	Rules []string
}

var redisPlaceholder = regexp.MustCompile(`^>\$[A-Z_]+$`)

// RedisUsers reads redis-acl.conf: its "user" lines, in order.
func RedisUsers() ([]RedisUser, error) {
	b, err := os.ReadFile(filepath.Join(Dir(), "redis-acl.conf"))
	if err != nil {
		return nil, err
	}
	var out []RedisUser
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if f[0] != "user" || len(f) < 3 {
			return nil, fmt.Errorf("redis-acl.conf: %q is no user line", sc.Text())
		}
		out = append(out, RedisUser{Name: f[1], Rules: f[2:]})
	}
	return out, sc.Err()
}

// WithPassword is u's rules with its password placeholder replaced by password.
func (u RedisUser) WithPassword(password string) []string {
	out := make([]string, 0, len(u.Rules))
	for _, r := range u.Rules {
		if redisPlaceholder.MatchString(r) {
			r = ">" + password
		}
		out = append(out, r)
	}
	return out
}

// MySQLGrants reads mysql-grants.sql as statements, split at AfterMigrations into
// those run before the migrations and those after. Placeholders stay as they are.
func MySQLGrants() (before, after []string, err error) {
	b, err := os.ReadFile(filepath.Join(Dir(), "mysql-grants.sql"))
	if err != nil {
		return nil, nil, err
	}
	head, tail, ok := strings.Cut(string(b), AfterMigrations)
	if !ok {
		return nil, nil, fmt.Errorf("mysql-grants.sql has no %q line", AfterMigrations)
	}
	_, tail, _ = strings.Cut(tail, "\n") // the rest of the marker's line
	return statements(head), statements(tail), nil
}

// statements cuts SQL at each line ending in ';', "--" comment lines left out.
func statements(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(t + " ")
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	return out
}
