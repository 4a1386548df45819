package configcenter

import (
	"context"
	"crypto/tls"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/configcenter/nacostest"
	"github.com/flashsale/platform/internal/testcert"
)

// testCA is a private CA: its PEM file, and a server certificate it signed for 127.0.0.1.
type testCA struct {
	pemFile string
	server  *tls.Config
}

func newTestCA(t *testing.T, name string) testCA {
	t.Helper()
	dir := t.TempDir()
	ca := testcert.NewCA(t, dir, name+".pem")
	return testCA{pemFile: ca.File, server: ca.Server(t, dir, "server.pem", "server.key").TLS}
}

// readOnce opens a store with cfg and reads the switches document once.
func readOnce(t *testing.T, cfg NacosConfig) (string, error) {
	t.Helper()
	cfg.CacheDir, cfg.LogDir = sdkDirs(t)
	cfg.Log, cfg.Timeout = quietLog(), time.Second
	s, err := NewNacosStore(cfg)
	if err != nil {
		return "", err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), startupWithin)
	defer cancel()
	d, err := s.Get(ctx)
	return string(d.Content), err
}

// The server speaks TLS only on both ports, with a login: a read succeeds only if
// the login went over HTTPS and the query over gRPC with TLS, each verified against
// the CA file. Before the client honoured TLS it spoke plaintext and this read failed.
func TestNacosTLSReadsAndVerifies(t *testing.T) {
	// The SDK's own switch for gRPC TLS must not override ours (TLSConfig.Appointed).
	t.Setenv("nacos_remote_client_rpc_tls_enable", "false")
	ca := newTestCA(t, "nacos-ca")
	srv := nacostest.StartTLS(t, ca.server)
	srv.AddUser("flashsale", "s3cret")
	ns, key := space(t)
	want := doc(true, "A_1")
	srv.Set(key, want)
	base := NacosConfig{Addr: srv.Addr(), Namespace: ns, Username: "flashsale", Password: "s3cret"}

	on := base
	on.TLS, on.CAFile = true, ca.pemFile
	got, err := readOnce(t, on)
	if err != nil || got != want {
		t.Fatalf("read over TLS: %q, %v; want the document", got, err)
	}
	if srv.Logins() == 0 {
		t.Fatal("no login reached the server over HTTPS")
	}

	t.Run("a server the CA did not sign is refused", func(t *testing.T) {
		other := on
		other.CAFile = newTestCA(t, "other-ca").pemFile
		before, q := srv.Logins(), srv.Queries()
		if got, err := readOnce(t, other); err == nil {
			t.Fatalf("read %q from a server whose certificate the CA did not sign", got)
		}
		if srv.Logins() != before || srv.Queries() != q {
			t.Fatal("the server answered a login or a query over an unverified connection")
		}
	})
	t.Run("plaintext to a TLS server fails", func(t *testing.T) {
		if got, err := readOnce(t, base); err == nil {
			t.Fatalf("read %q in plaintext from a TLS-only server", got)
		}
	})
}

// Without a login only gRPC carries the read: it too verifies the server.
func TestNacosTLSgRPCVerifies(t *testing.T) {
	ca := newTestCA(t, "nacos-ca")
	srv := nacostest.StartTLS(t, ca.server)
	ns, key := space(t)
	want := doc(false)
	srv.Set(key, want)
	cfg := NacosConfig{Addr: srv.Addr(), Namespace: ns, TLS: true, CAFile: newTestCA(t, "other-ca").pemFile}
	if got, err := readOnce(t, cfg); err == nil || srv.Queries() != 0 {
		t.Fatalf("read %q (%d queries served) over gRPC from a server the CA did not sign", got, srv.Queries())
	}
	cfg.CAFile = ca.pemFile
	if got, err := readOnce(t, cfg); err != nil || got != want {
		t.Fatalf("read over gRPC with TLS: %q, %v; want the document", got, err)
	}
}

// A bad TLS setting is refused before anything connects.
func TestNacosTLSSettingsRefused(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, ca, want string }{
		{"no CA file", "", "no CA file"},
		{"missing CA file", filepath.Join(dir, "absent.pem"), "absent.pem"},
		{"CA file without a certificate", notPEM, "not.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewNacosClient(NacosConfig{Addr: "127.0.0.1:8848", TLS: true, CAFile: tc.ca})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v; want one naming %q", err, tc.want)
			}
		})
	}
}

// The flags and the environment: the environment as the deploy files set it, a
// flag over it, and a bad value an error from Source and Store.
func TestNacosFlagsTLS(t *testing.T) {
	ca := newTestCA(t, "nacos-ca")
	parse := func(t *testing.T, args ...string) *NacosFlags {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		f := RegisterNacosFlags(fs)
		if err := fs.Parse(append([]string{"--nacos", "127.0.0.1:8848"}, args...)); err != nil {
			t.Fatal(err)
		}
		return f
	}
	t.Run("environment", func(t *testing.T) {
		t.Setenv(NacosTLSEnv, "true")
		t.Setenv(NacosCAEnv, ca.pemFile)
		c, err := parse(t).config(quietLog())
		if err != nil || !c.TLS || c.CAFile != ca.pemFile {
			t.Fatalf("config TLS %v CA %q, %v; want on with %s", c.TLS, c.CAFile, err, ca.pemFile)
		}
	})
	t.Run("flag over environment", func(t *testing.T) {
		t.Setenv(NacosTLSEnv, "true")
		t.Setenv(NacosCAEnv, ca.pemFile)
		c, err := parse(t, "--nacos-tls=false").config(quietLog())
		if err != nil || c.TLS {
			t.Fatalf("config TLS %v, %v; want off", c.TLS, err)
		}
		c, err = parse(t, "--nacos-tls", "--nacos-ca-file", ca.pemFile).config(quietLog())
		if err != nil || !c.TLS || c.CAFile != ca.pemFile {
			t.Fatalf("config TLS %v CA %q, %v; want on", c.TLS, c.CAFile, err)
		}
	})
	t.Run("unset is plaintext", func(t *testing.T) {
		t.Setenv(NacosTLSEnv, "")
		t.Setenv(NacosCAEnv, "")
		c, err := parse(t).config(quietLog())
		if err != nil || c.TLS {
			t.Fatalf("config TLS %v, %v; want off", c.TLS, err)
		}
	})
	for _, tc := range []struct{ name, on, ca string }{
		{"not a boolean", "yes please", ca.pemFile},
		{"on without a CA file", "true", ""},
		{"CA file missing", "true", filepath.Join(t.TempDir(), "absent.pem")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(NacosTLSEnv, tc.on)
			t.Setenv(NacosCAEnv, tc.ca)
			f := parse(t)
			if _, err := f.Source("", quietLog()); err == nil {
				t.Fatal("Source accepted the setting")
			}
			if _, err := f.Store("", quietLog()); err == nil {
				t.Fatal("Store accepted the setting")
			}
		})
	}
	t.Run("bad flag value", func(t *testing.T) {
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		RegisterNacosFlags(fs)
		if err := fs.Parse([]string{"--nacos-tls=maybe"}); err == nil {
			t.Fatal("--nacos-tls=maybe parsed")
		}
	})
}
