package store_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
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
	ca, other := newCA(t, dir, "ca"), newCA(t, dir, "other-ca")
	serverCert(t, dir, ca)
	port := startTLSMariaDB(t, dir)
	dsn := fmt.Sprintf("root@tcp(127.0.0.1:%d)/tls_test?tls=true&timeout=5s", port)
	ctx := context.Background()

	t.Setenv(store.CAEnv, "")
	if s, err := store.Open(ctx, dsn); err == nil {
		s.Close()
		t.Fatal("tls=true without the CA file trusted a certificate of an unknown CA")
	}
	t.Setenv(store.CAEnv, other.path)
	if s, err := store.Open(ctx, dsn); err == nil {
		s.Close()
		t.Fatal("tls=true trusted a certificate of a CA other than the file's")
	}
	t.Setenv(store.CAEnv, ca.path)
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

// testCA is a CA made for a test: its certificate's file, the certificate and key.
type testCA struct {
	path string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// newCA makes a self-signed CA, its certificate written to dir/name.crt.
func newCA(t *testing.T, dir, name string) testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	cert, err := x509.ParseCertificate(der)
	must(t, err)
	path := filepath.Join(dir, name+".crt")
	writePEM(t, path, "CERTIFICATE", der)
	return testCA{path: path, cert: cert, key: key}
}

// serverCert writes dir/server.crt and server.key for 127.0.0.1, signed by ca.
func serverCert(t *testing.T, dir string, ca testCA) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	must(t, err)
	writePEM(t, filepath.Join(dir, "server.crt"), "CERTIFICATE", der)
	writeKey(t, filepath.Join(dir, "server.key"), key)
}

func writeKey(t *testing.T, path string, key *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	must(t, err)
	writePEM(t, path, "PRIVATE KEY", der)
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	must(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600))
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
