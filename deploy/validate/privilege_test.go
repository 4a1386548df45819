package validate

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The service users of deploy/security/redis-acl.conf and mysql-grants.sql.
var (
	redisServiceUsers = []string{"grab-service", "promo-admin", "recovery"}
	mysqlServiceUsers = []string{"flashsale_grab", "flashsale_admin", "flashsale_sink", "flashsale_recovery"}
)

// redisForbidden are commands no service user may hold: they read or wipe every
// key, reconfigure, stop or replicate the server, or watch every client.
var redisForbidden = []string{"flushall", "flushdb", "config", "debug", "keys", "shutdown", "monitor", "acl",
	"replicaof", "slaveof", "module", "save", "bgsave", "bgrewriteaof", "migrate", "restore", "failover",
	"cluster", "client", "script", "function", "publish", "subscribe", "psubscribe", "swapdb", "lastsave"}

func readSecurity(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(Path("deploy", "security", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// redisUserLines maps each user of redis-acl.conf to its line.
func redisUserLines(t *testing.T) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(readSecurity(t, "redis-acl.conf"), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "user" {
			out[f[1]] = strings.TrimSpace(line)
		}
	}
	return out
}

// Each service's Redis user starts from reset, has a password from the
// environment, names its commands one by one (no category), no key pattern
// wider than its own, and none of the server-wide commands.
func TestPrivilegeRedisRulesAreNarrow(t *testing.T) {
	lines := redisUserLines(t)
	pass := regexp.MustCompile(`^>\$REDIS_[A-Z]+_PASSWORD$`)
	for _, u := range redisServiceUsers {
		line, ok := lines[u]
		if !ok {
			t.Errorf("redis-acl.conf has no user %s", u)
			continue
		}
		rules := strings.Fields(line)[2:]
		if rules[0] != "reset" {
			t.Errorf("%s: the rules start with %q, want reset", u, rules[0])
		}
		var hasPass bool
		for _, r := range rules {
			low := strings.ToLower(r)
			switch {
			case pass.MatchString(r):
				hasPass = true
			case strings.HasPrefix(r, ">") || low == "nopass":
				t.Errorf("%s: password rule %q is no $REDIS_*_PASSWORD placeholder", u, r)
			case strings.HasPrefix(r, "+@") || strings.HasPrefix(r, "-@"):
				t.Errorf("%s: category rule %q: name the commands one by one", u, r)
			case low == "~*" || low == "allkeys" || low == "%r~*" || low == "%w~*" || low == "%rw~*" ||
				low == "&*" || low == "allchannels" || low == "allcommands":
				t.Errorf("%s: %q reaches every key, channel or command", u, r)
			case strings.HasPrefix(r, "+"):
				cmd, _, _ := strings.Cut(low[1:], "|")
				for _, f := range redisForbidden {
					if cmd == f && low != "+client|setinfo" && low != "+script|load" {
						t.Errorf("%s: holds %s", u, r)
					}
				}
			}
		}
		if !hasPass {
			t.Errorf("%s: no >$REDIS_*_PASSWORD rule", u)
		}
	}
}

// The service users' MySQL grants name tables of the database, and no DDL, no
// GRANT OPTION, no ALL PRIVILEGES and no server-wide privilege anywhere.
func TestPrivilegeMySQLGrantsAreNarrow(t *testing.T) {
	src := readSecurity(t, "mysql-grants.sql")
	upper := strings.ToUpper(src)
	for _, bad := range []string{"ALL PRIVILEGES", "GRANT OPTION", " ON *.*", "SUPER", " FILE", "PROCESS", "SHUTDOWN"} {
		if strings.Contains(upper, bad) {
			t.Errorf("mysql-grants.sql contains %q", bad)
		}
	}
	grant := regexp.MustCompile("(?i)^GRANT (.+) ON `\\$\\{MYSQL_DATABASE\\}`\\.(\\S+) TO '([a-z_]+)'@'%';$")
	ident := regexp.MustCompile(`IDENTIFIED BY '\$\{MYSQL_[A-Z]+_PASSWORD\}'`)
	seen := map[string]bool{}
	for _, line := range strings.Split(src, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(strings.ToUpper(line), "CREATE USER"):
			if !ident.MatchString(line) {
				t.Errorf("a user without a ${MYSQL_*_PASSWORD} placeholder: %s", line)
			}
		case strings.HasPrefix(strings.ToUpper(line), "GRANT"):
			m := grant.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("a grant not of the form GRANT ... ON `${MYSQL_DATABASE}`.x TO 'user'@'%%': %s", line)
				continue
			}
			privs, on, user := strings.ToUpper(m[1]), m[2], m[3]
			seen[user] = true
			if user == "flashsale_migrate" {
				continue
			}
			if on == "*" {
				t.Errorf("%s is granted the whole database: %s", user, line)
			}
			for _, ddl := range []string{"CREATE", "ALTER", "DROP", "INDEX", "REFERENCES", "TRIGGER", "LOCK TABLES", "EXECUTE", "EVENT"} {
				if strings.Contains(privs, ddl) {
					t.Errorf("%s holds %s: %s", user, ddl, line)
				}
			}
		}
	}
	for _, u := range append(mysqlServiceUsers, "flashsale_migrate") {
		if !seen[u] {
			t.Errorf("mysql-grants.sql grants %s nothing", u)
		}
	}
}

// The shards' config in the Kubernetes manifests and the compose file embeds
// redis-acl.conf's lines exactly (compose doubles each $), and every service's
// MySQL DSN connects as its own user.
func TestPrivilegeRulesAreWired(t *testing.T) {
	k8s := readFile(t, Path("deploy", "k8s", "20-redis-shards.generated.yaml"))
	compose := readFile(t, Path("deploy", "compose", "compose.yaml"))
	for user, line := range redisUserLines(t) {
		if !strings.Contains(k8s, line) {
			t.Errorf("deploy/k8s/20-redis-shards.generated.yaml does not embed redis-acl.conf's %s line", user)
		}
		if !strings.Contains(compose, strings.ReplaceAll(line, "$", "$$")) {
			t.Errorf("deploy/compose/compose.yaml does not embed redis-acl.conf's %s line (with $$)", user)
		}
	}
	for _, u := range mysqlServiceUsers {
		if !strings.Contains(compose, `FLASHSALE_MYSQL_DSN: "`+u+`:`) {
			t.Errorf("no compose service connects to MySQL as %s", u)
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
