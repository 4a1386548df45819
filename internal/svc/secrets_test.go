package svc

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flashsale/platform/internal/httpx"
)

// Outside --local a service refuses to start without a token, with the
// placeholder of .env.example, or with a short one; a token may come from a file
// (a mounted Secret), never both ways at once.
func TestTokensRefusePlaceholders(t *testing.T) {
	spec := TokenSpec{Env: "FLASHSALE_TEST_TOKEN", LocalDefault: "dev-token", Role: httpx.RoleCheckout}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name         string
		env, viaFile string
		local        bool
		want         string // the token accepted, or "" for a refusal
	}{
		{"none outside local", "", "", false, ""},
		{"none in local mode: the development default", "", "", true, "dev-token"},
		{"the placeholder", "change-me-checkout", "", false, ""},
		{"the placeholder beside a real one", "0123456789abcdef0123,change-me-x", "", false, ""},
		{"too short", "short-token", "", false, ""},
		{"a real one", "0123456789abcdef0123", "", false, "0123456789abcdef0123"},
		{"from a file", "", file, false, "0123456789abcdef0123"},
		{"both ways", "0123456789abcdef0123", file, false, ""},
		{"the placeholder in local mode", "change-me-checkout", "", true, "change-me-checkout"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(spec.Env, c.env)
			t.Setenv(spec.Env+"_FILE", c.viaFile)
			ts, err := Tokens(c.local, spec)
			switch {
			case c.want == "" && err == nil:
				t.Fatalf("accepted %v, want a refusal", ts)
			case c.want != "" && (err != nil || len(ts) == 0 || ts[0].Token != c.want):
				t.Fatalf("have %v %v, want %q", ts, err, c.want)
			case err != nil && !strings.Contains(err.Error(), spec.Env):
				t.Fatalf("the refusal %q does not name %s", err, spec.Env)
			}
		})
	}
}

// The MySQL DSN, which holds a password, comes from the environment rather than
// argv; --mysql still wins when given (the local stack, tests).
func TestMySQLDSNFromTheEnvironment(t *testing.T) {
	t.Setenv(MySQLEnv, "app:secret@tcp(db:3306)/flashsale?parseTime=true")
	var f Flags
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f.Register(fs, ":0", ":0")
	if err := fs.Parse(nil); err != nil || f.MySQL != "app:secret@tcp(db:3306)/flashsale?parseTime=true" {
		t.Fatalf("from the environment: %q %v", f.MySQL, err)
	}
	var help strings.Builder
	fs.SetOutput(&help)
	fs.PrintDefaults()
	if strings.Contains(help.String(), "secret") {
		t.Fatal("-help shows the password")
	}
	if err := fs.Parse([]string{"--mysql", "root@tcp(127.0.0.1:3306)/x"}); err != nil || f.MySQL != "root@tcp(127.0.0.1:3306)/x" {
		t.Fatalf("--mysql given: %q %v", f.MySQL, err)
	}
}
