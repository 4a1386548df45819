package shardpool_test

import (
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/shardpool"
	"github.com/flashsale/platform/internal/svc"
	"github.com/flashsale/platform/internal/testcert"
)

// startSecured runs a redis-server of the test's own with an ACL user and, with
// tlsDir set, TLS only (its certificates there), and returns its address.
func startSecured(t *testing.T, tlsDir string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	args := []string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir(),
		"--requirepass", "default-secret-0123", "--user", "grab", "on", ">grab-secret-0123", "~*", "+@all"}
	if tlsDir == "" {
		args = append(args, "--port", port)
	} else {
		args = append(args, "--port", "0", "--tls-port", port, "--tls-auth-clients", "no",
			"--tls-cert-file", filepath.Join(tlsDir, "server.pem"), "--tls-key-file", filepath.Join(tlsDir, "server.key"),
			"--tls-ca-cert-file", filepath.Join(tlsDir, "ca.pem"))
	}
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + port
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) { // a start-up on a loaded machine
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not listen within 30 s", addr)
		}
	}
}

func poolWith(t *testing.T, addr string, auth svc.RedisAuth) error {
	t.Helper()
	// The dial includes the TLS handshake, CPU work the race detector and a loaded
	// machine slow many times; refusals come from the server, not from this bound.
	o := redis.Options{MaxRetries: -1, DialTimeout: 10 * time.Second}
	auth.Apply(&o)
	p, err := shardpool.New(repeat(addr, 16), o)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	return p.Ping(context.Background())
}

// The shard clients authenticate as the ACL user the environment names: right
// credentials answer, wrong or none are refused.
func TestPoolAuthenticates(t *testing.T) {
	t.Parallel()
	addr := startSecured(t, "")
	for _, c := range []struct {
		name string
		auth svc.RedisAuth
		ok   bool
	}{
		{"the service's ACL user", svc.RedisAuth{Username: "grab", Password: "grab-secret-0123"}, true},
		{"requirepass alone (user default)", svc.RedisAuth{Password: "default-secret-0123"}, true},
		{"a wrong password", svc.RedisAuth{Username: "grab", Password: "nope"}, false},
		{"no credentials", svc.RedisAuth{}, false},
	} {
		if err := poolWith(t, addr, c.auth); (err == nil) != c.ok {
			t.Errorf("%s: ping %v, want ok=%v", c.name, err, c.ok)
		}
	}
}

// With FLASHSALE_REDIS_TLS the clients speak TLS, trusting the CA file given;
// through the pool's own dialer (which follows shard moves) too.
func TestPoolSpeaksTLS(t *testing.T) {
	dir := t.TempDir()
	writeCerts(t, dir)
	addr := startSecured(t, dir)
	t.Setenv(svc.RedisUserEnv, "grab")
	t.Setenv(svc.RedisPasswordEnv, "grab-secret-0123")
	t.Setenv(svc.RedisTLSEnv, "true")
	t.Setenv(svc.RedisCAEnv, filepath.Join(dir, "ca.pem"))
	auth, err := svc.RedisAuthFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if err := poolWith(t, addr, auth); err != nil {
		t.Fatalf("over TLS: %v", err)
	}
	if err := poolWith(t, addr, svc.RedisAuth{Username: "grab", Password: "grab-secret-0123"}); err == nil {
		t.Fatal("plain TCP to a TLS-only server answered")
	}
	t.Setenv(svc.RedisCAEnv, "")
	untrusted, err := svc.RedisAuthFromEnv() // the system's CAs do not know the test's
	if err != nil {
		t.Fatal(err)
	}
	if err := poolWith(t, addr, untrusted); err == nil {
		t.Fatal("a server certificate of an unknown CA was trusted")
	}
}

// writeCerts writes a CA (ca.pem) and a server certificate for 127.0.0.1 it signed
// (server.pem, server.key) into dir.
func writeCerts(t *testing.T, dir string) {
	t.Helper()
	testcert.NewCA(t, dir, "ca.pem").Server(t, dir, "server.pem", "server.key")
}
