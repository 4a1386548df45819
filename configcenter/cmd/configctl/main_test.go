package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/configcenter/nacostest"

	"github.com/flashsale/platform/internal/testenv"
)

type result struct {
	code        int
	out, errOut string
}

// ctl runs configctl with args in-process.
func ctl(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	env := func(k string) string {
		if k == "USER" {
			return "oncall-" + t.Name()
		}
		return ""
	}
	code := run(context.Background(), args, strings.NewReader(stdin), &out, &errOut, env)
	return result{code, out.String(), errOut.String()}
}

func mustOK(t *testing.T, r result) result {
	t.Helper()
	if r.code != exitOK {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.out, r.errOut)
	}
	return r
}

// snapshot parses the document the store holds, as a service would.
func snapshot(t *testing.T, s configcenter.Store) *configcenter.Snapshot {
	t.Helper()
	d, err := s.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	snap, err := configcenter.Parse(d.Content)
	if err != nil {
		t.Fatalf("store holds a document services reject: %v\n%s", err, d.Content)
	}
	return snap
}

// target is one kind of store: the flags that address it, and the store itself.
type target struct {
	flags  []string
	store  configcenter.Store
	set    func(content string) // someone else writing directly
	source configcenter.Source  // what a service instance follows
}

func fileTarget(t *testing.T) target {
	path := filepath.Join(t.TempDir(), "switches.json")
	// The direct writes here are the break-glass path; promo-admin's route is
	// exercised end to end by promo-admin/internal/app (TestConfigctlThroughPromoAdmin).
	return target{flags: []string{"--file", path, "--break-glass", "test"}, store: configcenter.FileStore{Path: path},
		set: func(c string) {
			if err := os.WriteFile(path, []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}, source: configcenter.FileSource{Path: path}}
}

func nacosTarget(t *testing.T) target {
	srv := nacostest.Start(t)
	ns := strings.ReplaceAll(t.Name(), "/", "-")
	key := nacostest.Key{Tenant: ns, Group: configcenter.Group, DataID: configcenter.DataID}
	cache, err := os.MkdirTemp("", "configctl-cache-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(cache) })
	store, err := configcenter.NewNacosStore(configcenter.NacosConfig{Addr: srv.Addr(), Namespace: ns, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	hist := filepath.Join(t.TempDir(), "nacos.history.jsonl")
	return target{flags: []string{"--nacos", srv.Addr(), "--namespace", ns, "--history", hist, "--break-glass", "test"}, store: store,
		set:    func(c string) { srv.Set(key, c) },
		source: configcenter.NewNacosSource(configcenter.NacosConfig{Addr: srv.Addr(), Namespace: ns, CacheDir: cache, Log: slog.New(slog.DiscardHandler)})}
}

func args(tg target, rest ...string) []string {
	return append(append([]string{}, tg.flags...), rest...)
}

func TestConfigctl(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(*testing.T) target{"file": fileTarget, "nacos": nacosTarget} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tg := open(t)
			if r := ctl(t, "", args(tg, "get")...); r.code != exitFailed || !strings.Contains(r.errOut, "holds no switches document") {
				t.Fatalf("get on an empty store: %+v", r)
			}
			// The first set starts from the defaults the services run with.
			mustOK(t, ctl(t, "", args(tg, "set", "kafkaDegrade", "true")...))
			mustOK(t, ctl(t, "", args(tg, "set", "degradeRateFactor", "0.25")...))
			mustOK(t, ctl(t, "", args(tg, "set", "methodLimits.grab", "500")...))
			mustOK(t, ctl(t, "", args(tg, "set", "blockedPromotions", "+A_1")...))
			mustOK(t, ctl(t, "", args(tg, "set", "blockedPromotions", "+B_2")...))
			r := mustOK(t, ctl(t, "", args(tg, "set", "blockedPromotions", "-A_1")...))
			if !strings.Contains(r.out, `blockedPromotions: ["A_1","B_2"] -> ["B_2"]`) {
				t.Fatalf("set did not show its change:\n%s", r.out)
			}
			s := snapshot(t, tg.store)
			if !s.GrabEnabled || !s.KafkaDegrade || s.RateFactorPermille() != 250 || s.MethodLimits.Grab != 500 ||
				s.Blocked("A", 1) || !s.Blocked("B", 2) {
				t.Fatalf("switches after the sets: %+v", s.Switches)
			}

			// Invalid changes are refused before anything is published.
			before := snapshot(t, tg.store).MD5
			for _, bad := range [][]string{
				{"degradeRateFactor", "2"}, {"methodLimits.grab", "-1"}, {"grabEnabled", "maybe"},
				{"typo", "true"}, {"blockedPromotions", "+not a promotion"}, {"grabEnabled", `"false"`},
			} {
				if r := ctl(t, "", args(tg, "set", bad[0], bad[1])...); r.code != exitFailed {
					t.Fatalf("set %v: exit %d, want %d\n%s", bad, r.code, exitFailed, r.errOut)
				}
			}
			if after := snapshot(t, tg.store).MD5; after != before {
				t.Fatal("a refused change was published")
			}

			// get prints the document and its md5; --if-md5 pins the version looked at.
			r = mustOK(t, ctl(t, "", args(tg, "get")...))
			if !strings.Contains(r.errOut, "md5 "+before) || !json.Valid([]byte(r.out)) {
				t.Fatalf("get: %+v", r)
			}
			tg.set(strings.Replace(r.out, `"grab": 500`, `"grab": 900`, 1)) // another engineer, meanwhile
			if r := ctl(t, "", args(tg, "set", "--if-md5", before, "grabEnabled", "false")...); r.code != exitConflict {
				t.Fatalf("set over a stale md5: exit %d, want %d: %s", r.code, exitConflict, r.errOut)
			}
			if s := snapshot(t, tg.store); !s.GrabEnabled || s.MethodLimits.Grab != 900 {
				t.Fatalf("the other engineer's change was overwritten: %+v", s.Switches)
			}

			// diff: the document in force against the history, and a proposed file.
			r = mustOK(t, ctl(t, "", args(tg, "diff")...))
			if !strings.Contains(r.out, "someone else changed it") || !strings.Contains(r.out, "methodLimits.grab: 500 -> 900") {
				t.Fatalf("diff after an outside change:\n%s", r.out)
			}
			mustOK(t, ctl(t, "", args(tg, "set", "grabEnabled", "false")...))
			r = mustOK(t, ctl(t, "", args(tg, "diff")...))
			if strings.Contains(r.out, "someone else") || !strings.Contains(r.out, "grabEnabled: true -> false") {
				t.Fatalf("diff of the last publish:\n%s", r.out)
			}
			r = mustOK(t, ctl(t, `{"grabEnabled":true,"kafkaDegrade":false,"degradeRateFactor":3}`, args(tg, "diff", "-")...))
			if !strings.Contains(r.out, "kafkaDegrade: true -> false") || !strings.Contains(r.out, "services would reject") {
				t.Fatalf("diff of a proposed document:\n%s", r.out)
			}

			// put publishes a whole document, validated first.
			if r := ctl(t, `{"grabEnabled":tru`, args(tg, "put", "-")...); r.code != exitFailed {
				t.Fatalf("put of a malformed document: %+v", r)
			}
			mustOK(t, ctl(t, `{"grabEnabled":true}`, args(tg, "put", "-")...))
			if s := snapshot(t, tg.store); !s.GrabEnabled || s.KafkaDegrade {
				t.Fatalf("after put: %+v", s.Switches)
			}

			// history: every version published through this log, oldest first.
			r = mustOK(t, ctl(t, "", args(tg, "history")...))
			lines := strings.Split(strings.TrimSpace(r.out), "\n")
			if len(lines) != 8 || !strings.Contains(lines[0], "break-glass (test): set kafkaDegrade true") || !strings.Contains(lines[7], "put -") ||
				!strings.Contains(lines[0], "oncall-") {
				t.Fatalf("history:\n%s", r.out)
			}
		})
	}
}

// Engineers publishing at once never lose each other's changes: each publish
// either lands over the version it read or fails with a conflict.
func TestConfigctlConcurrentSetsNeverOverwriteBlindly(t *testing.T) {
	t.Parallel()
	tg := fileTarget(t)
	mustOK(t, ctl(t, "", args(tg, "set", "grabEnabled", "true")...))
	const writers = 12
	codes := make([]int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = ctl(t, "", args(tg, "set", "blockedPromotions", fmt.Sprintf("+P%d_1", i))...).code
		}()
	}
	wg.Wait()
	s := snapshot(t, tg.store)
	landed := 0
	for i, c := range codes {
		switch c {
		case exitOK:
			landed++
			if !s.Blocked(fmt.Sprintf("P%d", i), 1) {
				t.Errorf("writer %d was told it published, but its change is gone", i)
			}
		case exitConflict:
			if s.Blocked(fmt.Sprintf("P%d", i), 1) {
				t.Errorf("writer %d was told of a conflict, but its change is in force", i)
			}
		default:
			t.Errorf("writer %d: exit %d", i, c)
		}
	}
	if landed == 0 || len(s.BlockedPromotions) != landed {
		t.Fatalf("%d publishes landed, %d promotions blocked", landed, len(s.BlockedPromotions))
	}
}

// On-call bans a bot by pin and by address range, one entry at a time, and lifts
// a ban; each set is a compare-and-set over the version it read, like any other.
func TestConfigctlBlocksBuyers(t *testing.T) {
	t.Parallel()
	tg := fileTarget(t)
	mustOK(t, ctl(t, "", args(tg, "set", "blockedPins", "+bot-1")...))
	mustOK(t, ctl(t, "", args(tg, "set", "blockedPins", "+bot-2")...))
	mustOK(t, ctl(t, "", args(tg, "set", "blockedIps", "+10.66.0.0/16")...))
	mustOK(t, ctl(t, "", args(tg, "set", "blockedIps", "+2001:db8::1")...))
	r := mustOK(t, ctl(t, "", args(tg, "set", "blockedPins", "-bot-1")...))
	if !strings.Contains(r.out, `blockedPins: ["bot-1","bot-2"] -> ["bot-2"]`) {
		t.Fatalf("set did not show its change:\n%s", r.out)
	}
	s := snapshot(t, tg.store)
	if s.BlockedBuyer("bot-1", "198.51.100.1") || !s.BlockedBuyer("bot-2", "198.51.100.1") ||
		!s.BlockedBuyer("anyone", "10.66.7.8") || !s.BlockedBuyer("anyone", "2001:db8::1") || s.BlockedBuyer("anyone", "10.67.0.1") {
		t.Fatalf("blocked lists after the sets: pins %v, ips %v", s.BlockedPins, s.BlockedIPs)
	}
	before := s.MD5
	for _, bad := range [][]string{{"blockedIps", "+10.66.0.0/40"}, {"blockedIps", "+not-an-ip"}, {"blockedPins", "+has space"}} {
		if r := ctl(t, "", args(tg, "set", bad[0], bad[1])...); r.code != exitFailed {
			t.Fatalf("set %v: exit %d, want %d\n%s", bad, r.code, exitFailed, r.errOut)
		}
	}
	if snapshot(t, tg.store).MD5 != before {
		t.Fatal("a refused ban was published")
	}
	if r := ctl(t, "", args(tg, "set", "--if-md5", "0123456789abcdef0123456789abcdef", "blockedPins", "+bot-3")...); r.code != exitConflict {
		t.Fatalf("a ban over a version not in force: exit %d, want %d", r.code, exitConflict)
	}
}

// What configctl publishes is in force on a running instance within 1 s.
func TestConfigctlSetReachesARunningInstance(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(*testing.T) target{"file": fileTarget, "nacos": nacosTarget} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tg := open(t)
			mustOK(t, ctl(t, "", args(tg, "set", "grabEnabled", "true")...))
			holder := configcenter.NewHolder()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- configcenter.Follow(ctx, tg.source, holder, configcenter.NewMetrics(prometheus.NewRegistry()), slog.New(slog.DiscardHandler))
			}()
			t.Cleanup(func() { cancel(); <-done })
			applied := func(md5 string) func() bool { return func() bool { return holder.Load().MD5 == md5 } }
			first, _ := tg.store.Get(context.Background())
			testenv.Within(t, 30*time.Second, "the instance started on the published document", applied(first.MD5)) // a start-up, not a change: no 1 s bound

			mustOK(t, ctl(t, "", args(tg, "set", "blockedPromotions", "+HOT_1")...))
			next, _ := tg.store.Get(context.Background())
			testenv.Within(t, testenv.SwitchDeadline(), "the change in force on the instance", applied(next.MD5))
			if !holder.Load().Blocked("HOT", 1) {
				t.Fatalf("in force: %+v", holder.Load().Switches)
			}
		})
	}
}

func TestConfigctlUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, a := range [][]string{
		{}, {"get"}, {"--file", "x", "--nacos", "127.0.0.1:8848", "get"},
		{"--file", filepath.Join(dir, "s.json"), "frobnicate"},
		{"--file", filepath.Join(dir, "s.json"), "--break-glass", "x", "set", "grabEnabled"},
		// A change names its way: promo-admin's route or the break-glass write, one of them.
		{"--file", filepath.Join(dir, "s.json"), "set", "grabEnabled", "false"},
		{"--file", filepath.Join(dir, "s.json"), "set", "blockedPins", "+bot"},
		{"--file", filepath.Join(dir, "s.json"), "--api", "http://127.0.0.1:1", "--break-glass", "x", "set", "grabEnabled", "false"},
		{"--file", filepath.Join(dir, "s.json"), "--api", "not a url", "set", "grabEnabled", "false"},
	} {
		if r := ctl(t, "", a...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d", a, r.code, exitUsage)
		}
	}
}

// On-call's failover is one command: shardAddrs.N host:port points shard N at its
// promoted replica, - points it back at its flags' address; a bad address or
// shard number is refused and nothing is published.
func TestConfigctlMovesAShard(t *testing.T) {
	t.Parallel()
	tg := fileTarget(t)
	r := mustOK(t, ctl(t, "", args(tg, "set", "shardAddrs.3", "10.0.3.12:6379")...))
	if !strings.Contains(r.out, `shardAddrs.3: (absent) -> "10.0.3.12:6379"`) {
		t.Fatalf("set did not show its change:\n%s", r.out)
	}
	mustOK(t, ctl(t, "", args(tg, "set", "shardAddrs.7", "redis-7b:6379")...))
	if got := snapshot(t, tg.store).ShardAddrOverrides(); len(got) != 2 || got[3] != "10.0.3.12:6379" || got[7] != "redis-7b:6379" {
		t.Fatalf("overrides after the sets: %v", got)
	}
	before := snapshot(t, tg.store).MD5
	for _, bad := range [][]string{{"shardAddrs.16", "a:1"}, {"shardAddrs.3", "no-port"}, {"shardAddrs.x", "a:1"}} {
		if r := ctl(t, "", args(tg, "set", bad[0], bad[1])...); r.code != exitFailed {
			t.Fatalf("set %v: exit %d, want %d\n%s", bad, r.code, exitFailed, r.errOut)
		}
	}
	if snapshot(t, tg.store).MD5 != before {
		t.Fatal("a refused move was published")
	}
	mustOK(t, ctl(t, "", args(tg, "set", "shardAddrs.3", "-")...))
	mustOK(t, ctl(t, "", args(tg, "set", "shardAddrs.7", "-")...))
	if s := snapshot(t, tg.store); s.ShardAddrOverrides() != nil || s.ShardAddrs != nil {
		t.Fatalf("after moving both back: %v", s.ShardAddrs)
	}
}
