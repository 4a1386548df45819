package privilege

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/testenv"
)

// Redis is a redis-server of the test's own with redis-acl.conf's users loaded:
// Admin is its default user (the test's own setup and checks), Client(user) a
// service's connection as go-redis makes it (HELLO with the user's password).
type Redis struct {
	t      testing.TB
	Server *testenv.RedisServer
	Admin  *redis.Client
}

// Password is the test password of a user.
func Password(user string) string { return "test-" + user }

// StartRedis starts the server and loads every user of redis-acl.conf with its
// test password. A rule naming a command this redis-server does not know (a newer
// server's, such as client|setinfo before Redis 7.2) is left out, and logged: the
// client's use of such a command fails here as unknown whatever the rules say.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	srv := testenv.StartRedis(t, testenv.Volatile)
	r := &Redis{t: t, Server: srv, Admin: srv.Client()}
	users, err := RedisUsers()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, u := range users {
		args := []any{"acl", "setuser", u.Name}
		for _, rule := range u.WithPassword(Password(u.Name)) {
			if name, ok := commandOf(rule); ok && !r.knows(ctx, name) {
				t.Logf("redis-server knows no %s: rule %s of %s left out", name, rule, u.Name)
				continue
			}
			args = append(args, rule)
		}
		if err := r.Admin.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("ACL SETUSER %s: %v", u.Name, err)
		}
	}
	return r
}

// commandOf is the command a +cmd / -cmd rule names (not a category, key or password).
func commandOf(rule string) (string, bool) {
	if len(rule) < 2 || (rule[0] != '+' && rule[0] != '-') || rule[1] == '@' {
		return "", false
	}
	return rule[1:], true
}

func (r *Redis) knows(ctx context.Context, command string) bool {
	v, err := r.Admin.Do(ctx, "command", "info", command).Slice()
	return err == nil && len(v) == 1 && v[0] != nil
}

// Options are a service's client options as user, as shardpool would make them.
func (r *Redis) Options(user string) *redis.Options {
	return &redis.Options{Addr: r.Server.Addr, Username: user, Password: Password(user), Protocol: shardpool.Protocol}
}

// Client is a client of the server as user, closed when the test ends.
func (r *Redis) Client(user string) *redis.Client {
	c := redis.NewClient(r.Options(user))
	r.t.Cleanup(func() { c.Close() })
	return c
}

// ResetLog empties the server's ACL log.
func (r *Redis) ResetLog() {
	r.t.Helper()
	if err := r.Admin.Do(context.Background(), "acl", "log", "reset").Err(); err != nil {
		r.t.Fatal(err)
	}
}

// Denials lists what the server refused since the last ResetLog, as
// "user: reason object" (ACL LOG): a refusal the client swallowed shows too.
func (r *Redis) Denials() []string {
	r.t.Helper()
	entries, err := r.Admin.Do(context.Background(), "acl", "log", "128").Slice()
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		m := map[string]string{}
		if kv, ok := e.([]any); ok {
			for i := 0; i+1 < len(kv); i += 2 {
				m[fmt.Sprint(kv[i])] = fmt.Sprint(kv[i+1])
			}
		}
		out = append(out, fmt.Sprintf("%s: %s %s (%s)", m["username"], m["reason"], m["object"], m["context"]))
	}
	return out
}

// NoDenials fails the test when the server refused anything since the last ResetLog.
func (r *Redis) NoDenials() {
	r.t.Helper()
	if d := r.Denials(); len(d) > 0 {
		r.t.Errorf("redis-acl.conf refused what the code runs:\n  %s", strings.Join(d, "\n  "))
	}
}

// IsNoPerm reports whether err is Redis's refusal by the ACL (NOPERM).
func IsNoPerm(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOPERM")
}

// Refused checks that each command, run as user, is refused with NOPERM.
func (r *Redis) Refused(user string, cmds ...[]any) {
	r.t.Helper()
	c := r.Client(user)
	for _, cmd := range cmds {
		if err := c.Do(context.Background(), cmd...).Err(); !IsNoPerm(err) {
			r.t.Errorf("%s ran %v: got %v, want NOPERM", user, cmd, err)
		}
	}
}
