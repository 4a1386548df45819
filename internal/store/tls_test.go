package store_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/internal/testcert"
)

// The CA file is checked before any connection: missing, or holding no PEM, is a
// clear error naming the variable; tls=flashsale without it says what is missing.
func TestMySQLCAFileErrors(t *testing.T) {
	dir := t.TempDir()
	dsn := "u:p@tcp(127.0.0.1:1)/x?tls=true"
	t.Setenv(store.CAEnv, filepath.Join(dir, "absent.crt"))
	if _, err := store.Connect(context.Background(), dsn); err == nil || !strings.Contains(err.Error(), store.CAEnv) {
		t.Errorf("a missing CA file: got %v, want an error naming %s", err, store.CAEnv)
	}
	junk := filepath.Join(dir, "junk.crt")
	must(t, os.WriteFile(junk, []byte("not a certificate\n"), 0o600))
	t.Setenv(store.CAEnv, junk)
	if _, err := store.Connect(context.Background(), dsn); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Errorf("a CA file without PEM: got %v, want \"no PEM certificate\"", err)
	}
	t.Setenv(store.CAEnv, "")
	if _, err := store.Connect(context.Background(), "u:p@tcp(127.0.0.1:1)/x?tls=flashsale-other"); err == nil {
		t.Errorf("an unknown tls config name was accepted")
	}
	err := store.Migrate(context.Background(), "u:p@tcp(127.0.0.1:1)/x?tls="+store.TLSName, nil)
	if err == nil || !strings.Contains(err.Error(), store.CAEnv+" is not set") {
		t.Errorf("tls=%s without %s: got %v, want it named", store.TLSName, store.CAEnv, err)
	}
}

// A real TLS connection: a mariadbd of the test's own that takes TCP clients over
// TLS only, with a certificate of a CA made here. Open with tls=true verifies the
// server against the CA that FLASHSALE_MYSQL_CA_FILE names, and fails without it
// (the system's roots do not know the CA) or with another CA.
func TestMySQLTLSVerifiesAgainstTheCAFile(t *testing.T) {
	dir := t.TempDir()
	ca, other := testcert.NewCA(t, dir, "ca.crt"), testcert.NewCA(t, dir, "other-ca.crt")
	ca.Server(t, dir, "server.crt", "server.key")
	port := startTLSMariaDB(t, dir)
	dsn := fmt.Sprintf("root@tcp(127.0.0.1:%d)/tls_test?tls=true&timeout=5s", port)
	ctx := context.Background()

	t.Setenv(store.CAEnv, "")
	if s, err := store.Open(ctx, dsn); err == nil {
		s.Close()
		t.Fatal("tls=true without the CA file trusted a certificate of an unknown CA")
	}
	t.Setenv(store.CAEnv, other.File)
	if s, err := store.Open(ctx, dsn); err == nil {
		s.Close()
		t.Fatal("tls=true trusted a certificate of a CA other than the file's")
	}
	t.Setenv(store.CAEnv, ca.File)
	s, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open over TLS with the CA file: %v", err)
	}
	defer s.Close()
	var name, version string
	must(t, s.DB().QueryRow("SHOW SESSION STATUS LIKE 'Ssl_version'").Scan(&name, &version))
	if !strings.HasPrefix(version, "TLSv1.") || version < "TLSv1.2" {
		t.Fatalf("the session's TLS version is %q, want TLSv1.2 or later", version)
	}
}

// startTLSMariaDB starts mariadbd on a fresh data directory under dir, TCP over TLS
// only (require_secure_transport), without grant tables; killed when the test ends.
func startTLSMariaDB(t *testing.T, dir string) int {
	t.Helper()
	install, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		t.Skipf("mariadb-install-db not installed: %v", err)
	}
	server := "/usr/sbin/mariadbd"
	if p, err := exec.LookPath("mariadbd"); err == nil {
		server = p
	}
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(server, "--no-defaults", "--datadir="+data, "--port="+strconv.Itoa(port),
		"--bind-address=127.0.0.1", "--socket="+filepath.Join(dir, "sock"), "--user=root", "--skip-grant-tables",
		"--skip-log-bin", "--innodb-buffer-pool-size=32M", "--pid-file="+filepath.Join(dir, "pid"),
		"--ssl-ca="+filepath.Join(dir, "ca.crt"), "--ssl-cert="+filepath.Join(dir, "server.crt"),
		"--ssl-key="+filepath.Join(dir, "server.key"), "--require-secure-transport=ON")
	cmd.Stderr = &strings.Builder{}
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", l.Addr().String(), time.Second); err == nil {
			c.Close()
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("mariadbd did not listen within 30s:\n%s", cmd.Stderr)
		}
	}
}
