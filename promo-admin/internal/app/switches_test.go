package app_test

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/testenv"
	"github.com/flashsale/platform/promo-admin/internal/admintest"
	"github.com/flashsale/platform/promo-admin/internal/admintransport"
)

// GET /v1/switches shows the document in force: each new valid document within
// the config center's 1 s, a malformed one never (the last good one stays).
func TestSwitchesShowTheDocumentInForce(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "switches.json")
	e := admintest.Start(t, admintest.Options{Switches: configcenter.FileSource{Path: file, Interval: 20 * time.Millisecond}})

	read := func() admintransport.SwitchesView {
		t.Helper()
		r := e.Do(http.MethodGet, "/v1/switches", viewer, nil)
		var v admintransport.SwitchesView
		if r.Status != http.StatusOK || json.Unmarshal(r.Body, &v) != nil {
			t.Fatalf("GET /v1/switches: %s", r)
		}
		return v
	}
	if v := read(); v.MD5 != "default" || !v.Switches.GrabEnabled || v.Switches.DegradeRateFactor != 1 ||
		v.Switches.BlockedPromotions == nil || v.Source != "file:"+file {
		t.Errorf("before any document: %+v", v)
	}
	if r := e.Do(http.MethodGet, "/v1/switches", admin, nil); !strings.Contains(string(r.Body), `"blockedPromotions":[]`) ||
		r.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("no blocked promotions must be an empty list, not null, and not cached: %s %v", r, r.Header)
	}

	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sum := func(doc string) string { s := md5.Sum([]byte(doc)); return hex.EncodeToString(s[:]) }
	within := func(what string, cond func(admintransport.SwitchesView) bool) admintransport.SwitchesView {
		t.Helper()
		deadline := time.Now().Add(testenv.SwitchDeadline())
		for {
			v := read()
			if cond(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("not within %s: %s; have %+v", testenv.SwitchDeadline(), what, v)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	good := `{"grabEnabled":false,"kafkaDegrade":true,"degradeRateFactor":0.25,"methodLimits":{"grab":500,"cancel":50},"blockedPromotions":["A_1"]}`
	write(good)
	v := within("the document applied", func(v admintransport.SwitchesView) bool { return v.MD5 == sum(good) })
	sw := v.Switches
	if sw.GrabEnabled || !sw.KafkaDegrade || sw.DegradeRateFactor != 0.25 || sw.MethodLimits.Grab != 500 ||
		sw.MethodLimits.Cancel != 50 || len(sw.BlockedPromotions) != 1 || sw.BlockedPromotions[0] != "A_1" {
		t.Errorf("applied document: %+v", sw)
	}

	write(`{"grabEnabled":"no"}`)
	time.Sleep(200 * time.Millisecond) // ten polls of the file
	if v := read(); v.MD5 != sum(good) {
		t.Errorf("a malformed document replaced the good one: %+v", v)
	}

	partial := `{"kafkaDegrade":true}` // absent fields keep their defaults
	write(partial)
	v = within("the partial document applied", func(v admintransport.SwitchesView) bool { return v.MD5 == sum(partial) })
	if !v.Switches.GrabEnabled || !v.Switches.KafkaDegrade || v.Switches.DegradeRateFactor != 1 || len(v.Switches.BlockedPromotions) != 0 {
		t.Errorf("partial document: %+v", v.Switches)
	}
}
