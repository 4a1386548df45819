package configcenter

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/flashsale/platform/configcenter/nacostest"
)

// One contract, run against every Store: compare-and-set on the md5 read.
func TestStoreCompareAndSet(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) (Store, func(content string)) // the store, and a writer that is someone else
	}{
		{"file", func(t *testing.T) (Store, func(string)) {
			path := filepath.Join(t.TempDir(), "switches.json")
			return FileStore{Path: path}, func(c string) {
				if err := os.WriteFile(path, []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"nacos", func(t *testing.T) (Store, func(string)) {
			srv := nacostest.Start(t)
			ns, key := space(t)
			cache, logs := sdkDirs(t)
			s, err := NewNacosStore(NacosConfig{Addr: srv.Addr(), Namespace: ns, CacheDir: cache, LogDir: logs, Log: quietLog()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s, func(c string) { srv.Set(key, c) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			store, other := tc.open(t)
			if d, err := store.Get(ctx); err != nil || d.MD5 != "" {
				t.Fatalf("empty store: %+v %v", d, err)
			}
			v1 := []byte(doc(true))
			if err := store.Publish(ctx, v1, ""); err != nil {
				t.Fatalf("create: %v", err)
			}
			d, err := store.Get(ctx)
			if err != nil || d.MD5 != md5Hex(v1) || string(d.Content) != string(v1) {
				t.Fatalf("after create: %+v %v", d, err)
			}
			if err := store.Publish(ctx, []byte(doc(false)), ""); !errors.Is(err, ErrConflict) {
				t.Fatalf("create over an existing document: %v, want ErrConflict", err)
			}
			v2 := []byte(doc(false))
			if err := store.Publish(ctx, v2, d.MD5); err != nil {
				t.Fatalf("publish over the version read: %v", err)
			}
			// Someone else publishes between our read and our write.
			read, _ := store.Get(ctx)
			other(doc(true, "Z_9"))
			if err := store.Publish(ctx, []byte(doc(true)), read.MD5); !errors.Is(err, ErrConflict) {
				t.Fatalf("publish over a stale version: %v, want ErrConflict", err)
			}
			if now, _ := store.Get(ctx); now.MD5 != md5Hex([]byte(doc(true, "Z_9"))) {
				t.Fatalf("the other writer's version was overwritten: %s", now.Content)
			}
		})
	}
}

// The file is replaced by rename: a reader sees the old or the new document, never a mix.
func TestFileStoreReplacesAtomically(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "switches.json")
	store := FileStore{Path: path}
	ctx := context.Background()
	a, b := []byte(doc(true)), []byte(doc(false, "LONG-PROMOTION-ID-FOR-A-LONGER-DOCUMENT_1"))
	if err := store.Publish(ctx, a, ""); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	bad := make(chan string, 1)
	go func() {
		for {
			select {
			case <-stop:
				close(bad)
				return
			default:
			}
			got, err := os.ReadFile(path)
			if err == nil && string(got) != string(a) && string(got) != string(b) {
				bad <- string(got)
				close(bad)
				return
			}
		}
	}()
	cur := md5Hex(a)
	for i := range 200 {
		next := a
		if i%2 == 0 {
			next = b
		}
		if err := store.Publish(ctx, next, cur); err != nil {
			t.Fatal(err)
		}
		cur = md5Hex(next)
	}
	close(stop)
	if got, ok := <-bad; ok {
		t.Fatalf("a reader saw a torn document: %q", got)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".switches.json.tmp-*")); len(left) != 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
}
