package httpx

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// The public /readyz runs its checks once for a flood of askers and says only
// ready or not: a failing check's name and error stay off it.
func TestPublicProbesShareOneRunAndSayNoMore(t *testing.T) {
	t.Parallel()
	var runs atomic.Int64
	var failing atomic.Bool
	check := func(context.Context) error {
		runs.Add(1)
		if failing.Load() {
			return errors.New("redis 10.0.0.7:6379: connection refused")
		}
		return nil
	}
	mux := http.NewServeMux()
	PublicProbes(mux, map[string]Check{"redis": check})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code, body := probe(t, srv.URL); code != http.StatusOK || body != `{"status":"ready"}` {
				t.Errorf("ready: %d %s", code, body)
			}
		}()
	}
	wg.Wait()
	if n := runs.Load(); n > 2 {
		t.Fatalf("100 asks ran the checks %d times; want at most 2", n)
	}

	failing.Store(true)
	mux = http.NewServeMux()
	PublicProbes(mux, map[string]Check{"redis": check})
	srv2 := httptest.NewServer(mux)
	defer srv2.Close()
	if code, body := probe(t, srv2.URL); code != http.StatusServiceUnavailable || body != `{"status":"not ready"}` {
		t.Fatalf("not ready: %d %s", code, body)
	}
}

func probe(t *testing.T, base string) (int, string) {
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
