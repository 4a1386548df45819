// Package alerttest runs the alert chain end to end on the local stack: a component
// fails, Debian's Prometheus (deploy/local/observe.sh, the committed rules with `for:`
// cut to 5 s) fires the committed alert, Debian's Alertmanager routes it by the
// committed file to a webhook, and the webhook (this test's HTTP server, standing in
// for on-call's chat or paging bridge, which cannot run here) receives it with its
// runbook link, then its resolution once the component is back. It stops the flow
// sink and fences a shard, so it runs only when FLASHSALE_ALERT_TEST=1.
package alerttest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/stack"
)

// fencedShard is fenced by hand, as a rebuild fences it (promo.FenceKey).
const fencedShard = 15

// alert is one alert of an Alertmanager webhook notification.
type alert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// receiver keeps every alert the webhook was sent.
type receiver struct {
	mu     sync.Mutex
	alerts []alert
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var n struct {
		Alerts []alert `json:"alerts"`
	}
	if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.alerts = append(rc.alerts, n.Alerts...)
	rc.mu.Unlock()
}

// await waits until an alert named name, with labels match, arrives with status.
func (rc *receiver) await(t *testing.T, name, status string, match map[string]string, within time.Duration) alert {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		rc.mu.Lock()
		for _, a := range rc.alerts {
			if a.Labels["alertname"] == name && a.Status == status && labelsMatch(a.Labels, match) {
				rc.mu.Unlock()
				return a
			}
		}
		rc.mu.Unlock()
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("no %s alert %s %v reached the receiver within %s", status, name, match, within)
	return alert{}
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func TestAlertsReachTheReceiver(t *testing.T) {
	if os.Getenv("FLASHSALE_ALERT_TEST") != "1" {
		t.Skip("stops the flow sink and fences a shard of the local stack; set FLASHSALE_ALERT_TEST=1 (make test does)")
	}
	root, err := stack.Root()
	if err != nil {
		t.Fatal(err)
	}
	st, err := stack.Load("")
	if err != nil {
		t.Fatalf("load the stack file (is the stack up?): %v", err)
	}
	rc := &receiver{}
	hook := httptest.NewServer(rc)
	defer hook.Close()
	observe(t, root, hook.URL+"/alerts")

	t.Run("flow sink stopped", func(t *testing.T) {
		stopFlowSink(t, st)
		a := rc.await(t, "FlashsaleTargetDown", "firing", map[string]string{"job": "flow-sink"}, 60*time.Second)
		checkRunbook(t, a)
		restartStack(t, root)
		rc.await(t, "FlashsaleTargetDown", "resolved", map[string]string{"job": "flow-sink"}, 60*time.Second)
	})
	t.Run("shard fenced", func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: st.Redis[fencedShard]})
		defer c.Close()
		ctx := context.Background()
		key := promo.FenceKey(fencedShard)
		// A TTL as the rebuild's own marker has, so a test killed midway fences no longer.
		if err := c.Set(ctx, key, "alerttest", 2*time.Minute).Err(); err != nil {
			t.Fatalf("set %s: %v", key, err)
		}
		defer c.Del(ctx, key)
		match := map[string]string{"shard": strconv.Itoa(fencedShard)}
		a := rc.await(t, "RedisShardFenced", "firing", match, 60*time.Second)
		checkRunbook(t, a)
		if err := c.Del(ctx, key).Err(); err != nil {
			t.Fatalf("del %s: %v", key, err)
		}
		rc.await(t, "RedisShardFenced", "resolved", match, 60*time.Second)
	})
}

// observe starts Prometheus and Alertmanager of the test's own (own folder and ports,
// fast timings) sending to url, and stops them at the end.
func observe(t *testing.T, root, url string) {
	script := filepath.Join(root, "deploy", "local", "observe.sh")
	env := append(os.Environ(), "FLASHSALE_OBSERVE_DIR="+t.TempDir(), "FLASHSALE_OBSERVE_FAST=1",
		"FLASHSALE_PROM_LISTEN=127.0.0.1:19090", "FLASHSALE_AM_LISTEN=127.0.0.1:19093", "ALERT_WEBHOOK_URL="+url)
	run := func(arg string) ([]byte, error) {
		cmd := exec.Command(script, arg)
		cmd.Env = env
		return cmd.CombinedOutput()
	}
	out, err := run("up")
	t.Cleanup(func() {
		if out, err := run("down"); err != nil {
			t.Errorf("observe.sh down: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("observe.sh up: %v\n%s", err, out)
	}
}

func stopFlowSink(t *testing.T, st stack.File) {
	pid := st.Pids["flow-sink"]
	if pid == 0 {
		t.Fatal("the stack file names no flow-sink pid")
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatalf("stop the flow sink (pid %d): %v", pid, err)
	}
	t.Logf("flow sink (pid %d) stopped", pid)
}

// restartStack brings the flow sink back as on-call would: the stack's `up` restarts
// what is gone and leaves the rest alone.
func restartStack(t *testing.T, root string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "deploy", "local", "stack.sh"), "up")
	cmd.Env = append(os.Environ(), "STACK_BUILT=1")
	cmd.WaitDelay = 10 * time.Second
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("stack.sh up: %v\n%s", err, out)
	}
}

func checkRunbook(t *testing.T, a alert) {
	t.Helper()
	want := fmt.Sprintf("deploy/RUNBOOK.md#alert-%s", strings.ToLower(a.Labels["alertname"]))
	if got := a.Annotations["runbook_url"]; got != want {
		t.Errorf("%s arrived with runbook_url %q, want %q", a.Labels["alertname"], got, want)
	}
	if a.Annotations["summary"] == "" {
		t.Errorf("%s arrived without a summary", a.Labels["alertname"])
	}
}
