package grabtransport

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/flashsale/platform/grab-service/internal/grab"
)

// /readyz stays 200 and names the fenced shards; other routes pass untouched.
func TestReadyzNamesFencedShards(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ready"}`))
	})
	mux.HandleFunc("GET /other", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("other")) })
	const lost = 5
	srv := httptest.NewServer(Readyz(func() []grab.FencedShard { return []grab.FencedShard{{Shard: lost, Why: "lost"}} }, mux))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string             `json:"status"`
		Fenced []grab.FencedShard `json:"fencedShards"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 200 || body.Status != "ready" || len(body.Fenced) != 1 || body.Fenced[0].Shard != lost {
		t.Fatalf("/readyz: %d %+v %v", resp.StatusCode, body, err)
	}
	other, err := http.Get(srv.URL + "/other")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Body.Close()
	var b [16]byte
	if n, _ := other.Body.Read(b[:]); string(b[:n]) != "other" {
		t.Fatalf("/other: %q", b[:n])
	}
}
