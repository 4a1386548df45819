package app_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
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

	if v := readSwitches(t, e); v.MD5 != "default" || !v.Switches.GrabEnabled || v.Switches.DegradeRateFactor != 1 ||
		v.Switches.BlockedPromotions == nil || v.Source != "file:"+file {
		t.Errorf("before any document: %+v", v)
	}
	if r := e.Do(http.MethodGet, "/v1/switches", admin, nil); !strings.Contains(string(r.Body), `"blockedPromotions":[]`) ||
		r.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("no blocked promotions must be an empty list, not null, and not cached: %s %v", r, r.Header)
	}

	good := `{"grabEnabled":false,"kafkaDegrade":true,"degradeRateFactor":0.25,"methodLimits":{"grab":500,"cancel":50},"blockedPromotions":["A_1"]}`
	writeSwitches(t, file, good)
	v := switchesWithin(t, e, "the document applied", func(v admintransport.SwitchesView) bool { return v.MD5 == md5Hex(good) })
	sw := v.Switches
	if sw.GrabEnabled || !sw.KafkaDegrade || sw.DegradeRateFactor != 0.25 || sw.MethodLimits.Grab != 500 ||
		sw.MethodLimits.Cancel != 50 || len(sw.BlockedPromotions) != 1 || sw.BlockedPromotions[0] != "A_1" {
		t.Errorf("applied document: %+v", sw)
	}

	writeSwitches(t, file, `{"grabEnabled":"no"}`)
	time.Sleep(200 * time.Millisecond) // ten polls of the file
	if v := readSwitches(t, e); v.MD5 != md5Hex(good) {
		t.Errorf("a malformed document replaced the good one: %+v", v)
	}

	partial := `{"kafkaDegrade":true}` // absent fields keep their defaults
	writeSwitches(t, file, partial)
	v = switchesWithin(t, e, "the partial document applied", func(v admintransport.SwitchesView) bool { return v.MD5 == md5Hex(partial) })
	if !v.Switches.GrabEnabled || !v.Switches.KafkaDegrade || v.Switches.DegradeRateFactor != 1 || len(v.Switches.BlockedPromotions) != 0 {
		t.Errorf("partial document: %+v", v.Switches)
	}
}

// readSwitches is GET /v1/switches.
func readSwitches(t *testing.T, e *admintest.Env) admintransport.SwitchesView {
	t.Helper()
	r := e.Do(http.MethodGet, "/v1/switches", viewer, nil)
	var v admintransport.SwitchesView
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &v) != nil {
		t.Fatalf("GET /v1/switches: %s", r)
	}
	return v
}

// writeSwitches puts doc in the switches file.
func writeSwitches(t *testing.T, file, doc string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
}

// md5Hex is a document's MD5 as GET /v1/switches shows it.
func md5Hex(doc string) string { s := md5.Sum([]byte(doc)); return hex.EncodeToString(s[:]) }

// switchesWithin reads GET /v1/switches until cond holds, for at most the
// config center's deadline.
func switchesWithin(t *testing.T, e *admintest.Env, what string, cond func(admintransport.SwitchesView) bool) admintransport.SwitchesView {
	t.Helper()
	deadline := time.Now().Add(testenv.SwitchDeadline())
	for {
		v := readSwitches(t, e)
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s; have %+v", testenv.SwitchDeadline(), what, v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A failover through the switches (shardAddrs): within the config center's second
// promo-admin writes the moved shard's promotions on the server the document
// names, and after the move back on the shard's own server again.
func TestSwitchesMoveAShard(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "switches.json")
	e := admintest.Start(t, admintest.Options{Switches: configcenter.FileSource{Path: file, Interval: 20 * time.Millisecond}})
	replica := testenv.StartRedis(t, testenv.Volatile)
	rc := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer rc.Close()
	suffix := testenv.Suffix()
	const shard = 6
	n := 0
	fresh := func() string { // a new promotion id whose key the ring puts on shard
		for {
			n++
			if id := fmt.Sprintf("mv%d-%s", n, suffix); ring.Default.Shard(promo.Key(id, 1)) == shard {
				return id
			}
		}
	}
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	createdOn := func(c *redis.Client, id string) bool {
		t.Helper()
		return c.Exists(context.Background(), promo.Key(id, 1)).Val() == 1
	}

	write(`{"shardAddrs": {"6": "` + replica.Addr + `"}}`)
	var moved string
	testenv.Within(t, testenv.SwitchDeadline(), "a create lands on the moved shard's new server", func() bool {
		moved = fresh()
		r := e.Do(http.MethodPost, "/v1/promotions", admin, e.Spec(moved))
		return r.Status == http.StatusCreated && createdOn(rc, moved)
	})
	if createdOn(e.Shard(shard), moved) {
		t.Fatal("the create also reached the shard's own server")
	}
	write(`{}`)
	var back string
	testenv.Within(t, testenv.SwitchDeadline(), "a create lands on the shard's own server again", func() bool {
		back = fresh()
		r := e.Do(http.MethodPost, "/v1/promotions", admin, e.Spec(back))
		return r.Status == http.StatusCreated && createdOn(e.Shard(shard), back)
	})
	if createdOn(rc, back) {
		t.Fatal("after the move back a create reached the replica")
	}
}
