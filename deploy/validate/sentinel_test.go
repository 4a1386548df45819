package validate

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/flashsale/platform/deploy/validate/k8sgen"
)

// runSentinelScript runs a sentinel's start script under sh, as the pod or container
// named host, with a redis-cli that finds no peer, and returns the config it wrote.
func runSentinelScript(t *testing.T, errs *Errs, where, host, script string) string {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Logf("%s: no sh to run the script: %v", where, err)
		return ""
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "redis-cli"), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(script, "exec redis-server") {
		errs.Addf("%s: the script does not exec redis-server", where)
		return ""
	}
	script = strings.NewReplacer("/data", dir, "exec redis-server", "exit 0; exec redis-server").Replace(script)
	cmd := exec.Command(sh, "-ec", script)
	cmd.Env = []string{"PATH=" + bin + ":" + os.Getenv("PATH"), "HOSTNAME=" + host, "REDISCLI_AUTH=secret",
		"REDIS_GRAB_PASSWORD=g", "REDIS_ADMIN_PASSWORD=a", "REDIS_RECOVERY_PASSWORD=r"}
	if out, err := cmd.CombinedOutput(); err != nil {
		errs.Addf("%s: the script fails under %s: %v\n%s", where, sh, err, out)
		return ""
	}
	conf, err := os.ReadFile(filepath.Join(dir, "sentinel.conf"))
	if err != nil {
		errs.Addf("%s: the script writes no /data/sentinel.conf: %v", where, err)
	}
	return string(conf)
}

// checkMonitoredHosts: shard N's master, when no peer names another, is master(N).
func checkMonitoredHosts(errs *Errs, where, conf string, master func(int) string) {
	for i := 0; i < Shards; i++ {
		want := fmt.Sprintf("sentinel monitor %s%d %s 6379 ", SentinelPrefix, i, master(i))
		if !strings.Contains(conf, want) {
			errs.Addf("%s: no %q: shard %d's master is not the one the services start with", where, want, i)
		}
	}
}

// The sentinels: an odd number of at least three in each stack, each watching every
// shard's master (CheckSentinelConf), on the shards' own image.
func TestSentinels(t *testing.T) {
	var errs Errs
	p, err := loadCompose(t, composeEnv(t), "*")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range p.Services {
		if !strings.HasPrefix(s.Name, "redis-sentinel-") {
			continue
		}
		n++
		where := "compose " + s.Name
		if !slices.Contains(composeWant.Sentinels, s.Name+":26379") {
			errs.Addf("%s: not among the services' --redis-sentinels %v", where, composeWant.Sentinels)
		}
		if len(s.Entrypoint) != 3 {
			errs.Addf("%s: want /bin/sh -ec SCRIPT as its entrypoint", where)
			continue
		}
		conf := runSentinelScript(t, &errs, where, s.Name, s.Entrypoint[2])
		for _, e := range CheckSentinelConf(conf, len(composeWant.Sentinels)) {
			errs.Addf("%s: %s", where, e)
		}
		checkMonitoredHosts(&errs, where, conf, func(i int) string { return fmt.Sprintf("redis-master-%d", i) })
	}
	if n != len(composeWant.Sentinels) || n < 3 || n%2 == 0 {
		errs.Addf("compose: %d sentinels, want the %d of --redis-sentinels, an odd number of at least 3", n, len(composeWant.Sentinels))
	}
	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	if o := find(objs, "StatefulSet", "redis-sentinel"); o == nil {
		errs.Addf("no StatefulSet redis-sentinel")
	} else {
		ss := o.obj.(*appsv1.StatefulSet)
		if r := deref(ss.Spec.Replicas, 1); int(r) != len(k8sWant.Sentinels) || r < 3 || r%2 == 0 {
			errs.Addf("%s: %d sentinels, want the %d of --redis-sentinels, an odd number of at least 3", o.where(), r, len(k8sWant.Sentinels))
		}
		c := ss.Spec.Template.Spec.Containers[0]
		if c.Image != k8sgen.RedisImage {
			errs.Addf("%s: image %s, want the shards' %s", o.where(), c.Image, k8sgen.RedisImage)
		}
		if len(c.Args) != 1 {
			errs.Addf("%s: want one script as its args", o.where())
		} else {
			conf := runSentinelScript(t, &errs, o.where(), "redis-sentinel-0", c.Args[0])
			for _, e := range CheckSentinelConf(conf, len(k8sWant.Sentinels)) {
				errs.Addf("%s: %s", o.where(), e)
			}
			checkMonitoredHosts(&errs, o.where(), conf, func(i int) string {
				return fmt.Sprintf("redis-shard-%d-0.redis-shard-%d.%s.svc.cluster.local", i, i, k8sgen.Namespace)
			})
		}
	}
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}
