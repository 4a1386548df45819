package validate

import (
	"k8s.io/apimachinery/pkg/runtime"
	"slices"
	"strings"
	"testing"
)

// goodGrab is a production grab-service invocation of the compose stack that every
// check accepts; the tests below break one thing at a time.
func goodGrab() Invocation {
	return Invocation{Where: "test", Binary: "grab-service", Env: map[string]bool{"FLASHSALE_CHECKOUT_TOKEN": true, MySQLEnv: true,
		RedisUserEnv: true, RedisPasswordEnv: true, KafkaMechanismEnv: true, KafkaUserEnv: true, KafkaPasswordEnv: true, NacosPasswordEnv: true},
		EnvValue: map[string]string{},
		Args: []string{"--listen", ":8080", "--ops-listen", ":9180", "--max-conns", "10000",
			"--redis", strings.Join(composeWant.Redis, ","), "--redis-sentinels", strings.Join(composeWant.Sentinels, ","),
			"--redis-allow", "redis-master-*,redis-replica-*",
			"--kafka", strings.Join(composeWant.Kafka, ","), "--nacos", "nacos:8848", "--nacos-username", "flashsale"}}
}

// setFlag sets (or, with "", removes) a flag of inv.
func setFlag(inv *Invocation, name, value string) {
	i := slices.Index(inv.Args, "--"+name)
	switch {
	case i >= 0 && value == "":
		inv.Args = slices.Delete(inv.Args, i, i+2)
	case i >= 0:
		inv.Args[i+1] = value
	case value != "":
		inv.Args = append(inv.Args, "--"+name, value)
	}
}

func refusals(inv Invocation, want Expected) string {
	var errs Errs
	CheckInvocation(inv, want, &errs, func(string) {})
	return strings.Join(errs, "\n")
}

// Every process that reaches Redis names the servers on-call's shardAddrs may point a
// shard at, by flag or FLASHSALE_REDIS_ALLOW, and they are the shards' own.
func TestRedisAllowRefusesMissingOrForeignServers(t *testing.T) {
	if r := refusals(goodGrab(), composeWant); r != "" {
		t.Fatalf("a good invocation refused:\n%s", r)
	}
	viaEnv := goodGrab()
	setFlag(&viaEnv, "redis-allow", "")
	viaEnv.Env[RedisAllowEnv], viaEnv.EnvValue[RedisAllowEnv] = true, "redis-master-*,redis-replica-*"
	if r := refusals(viaEnv, composeWant); r != "" {
		t.Errorf("the allowlist from %s refused:\n%s", RedisAllowEnv, r)
	}
	for name, list := range map[string]string{
		"missing":                          "",
		"a foreign host":                   "redis-master-*,redis-replica-*,attacker.example.com",
		"an address":                       "redis-master-*,10.0.0.9:6379",
		"any host":                         "*",
		"a glob wider than the shards":     "redis-*",
		"a foreign domain":                 "redis-master-*,redis-replica-*,redis-master-0.evil.example",
		"a glob under a shard name":        "redis-master-*,redis-replica-*.*",
		"a port no shard has":              "redis-master-*:22,redis-replica-*",
		"the sentinels":                    "redis-master-*,redis-sentinel-*",
		"the replicas without the masters": "redis-replica-*",
		"the other stack's shards":         "redis-shard-*,redis-shard-*.redis-shard-*",
	} {
		inv := goodGrab()
		setFlag(&inv, "redis-allow", list)
		if r := refusals(inv, composeWant); !strings.Contains(r, "redis-allow") {
			t.Errorf("%s (%q): accepted", name, list)
		}
	}
	secret := goodGrab()
	setFlag(&secret, "redis-allow", "")
	secret.Env[RedisAllowEnv] = true // from a Secret: its value is not the deploy file's
	if r := refusals(secret, composeWant); !strings.Contains(r, RedisAllowEnv) {
		t.Errorf("an allowlist the file does not show: accepted")
	}
	// Kubernetes: the masters' Services, the pods by their StatefulSet's Service.
	for _, ok := range []string{"redis-shard-*,redis-shard-*.redis-shard-*,redis-shard-*.redis-shard-*.flashsale.svc.cluster.local",
		"redis-shard-*-master,redis-shard-3-1.redis-shard-3:6379"} {
		if p := CheckRedisAllow(ok, k8sWant); len(p) > 0 {
			t.Errorf("%q refused: %v", ok, p)
		}
	}
	for _, bad := range []string{"redis-shard-*,redis-shard-*.*", "redis-shard-*,redis-shard-*.redis-shard-*.flashsale.svc.cluster.evil",
		"redis-shard-*,redis-sentinel-*.redis-sentinel", "redis-shard-*,*.flashsale.svc.cluster.local"} {
		if len(CheckRedisAllow(bad, k8sWant)) == 0 {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A server's listeners are bounded by --max-conns, named in the file.
func TestMaxConnsMustBeSetAndSane(t *testing.T) {
	for _, v := range []string{"1", "1000", "100000"} {
		inv := goodGrab()
		setFlag(&inv, "max-conns", v)
		if r := refusals(inv, composeWant); r != "" {
			t.Errorf("--max-conns %s refused:\n%s", v, r)
		}
	}
	for name, v := range map[string]string{"the default": "", "no bound": "0", "negative": "-5", "beyond a pod's descriptors": "1000000", "not a number": "lots"} {
		inv := goodGrab()
		setFlag(&inv, "max-conns", v)
		if r := refusals(inv, composeWant); !strings.Contains(r, "--max-conns") {
			t.Errorf("%s (%q): accepted", name, v)
		}
	}
	// A one-shot command has no listener to bound.
	verify := Invocation{Where: "test", Binary: "recovery", Env: map[string]bool{MySQLEnv: true, RedisUserEnv: true, RedisPasswordEnv: true,
		KafkaMechanismEnv: true, KafkaUserEnv: true, KafkaPasswordEnv: true},
		Args: []string{"verify", "--redis", strings.Join(composeWant.Redis, ","), "--redis-sentinels", strings.Join(composeWant.Sentinels, ","),
			"--redis-allow", "redis-master-*", "--kafka", strings.Join(composeWant.Kafka, ",")}}
	if r := refusals(verify, composeWant); strings.Contains(r, "max-conns") {
		t.Errorf("recovery verify asked for --max-conns: %s", r)
	}
}

// grab-service and recovery count an IPv6 buyer by one prefix, the default or the
// same value everywhere.
func TestIPv6PrefixMustAgree(t *testing.T) {
	rebuild := Invocation{Where: "rebuild", Binary: "recovery", Args: []string{"rebuild", "--redis", "x"}}
	archive := Invocation{Where: "archive", Binary: "recovery", Args: []string{"archive"}}
	admin := Invocation{Where: "promo-admin", Binary: "promo-admin", Args: []string{"--listen", ":8081"}}
	with := func(inv Invocation, v string) Invocation {
		inv.Args = append(slices.Clone(inv.Args), "--ipv6-prefix", v)
		return inv
	}
	grab := Invocation{Where: "grab", Binary: "grab-service", Args: []string{"--listen", ":8080"}}
	sink := Invocation{Where: "sink", Binary: "recovery", Args: []string{"sink", "--heal"}}
	for name, c := range map[string]struct {
		invs []Invocation
		ok   bool
	}{
		"all the default":            {[]Invocation{grab, rebuild, sink, admin, archive}, true},
		"all 56":                     {[]Invocation{with(grab, "56"), with(rebuild, "56"), with(sink, "56")}, true},
		"the default written out":    {[]Invocation{with(grab, "64"), rebuild, sink}, true},
		"grab-service alone changed": {[]Invocation{with(grab, "56"), rebuild, sink}, false},
		"the rebuild alone changed":  {[]Invocation{grab, with(rebuild, "128"), sink}, false},
		"the healer alone changed":   {[]Invocation{grab, rebuild, with(sink, "48")}, false},
		"out of range everywhere":    {[]Invocation{with(grab, "129"), with(rebuild, "129")}, false},
	} {
		var errs Errs
		CheckIPv6PrefixAgree(c.invs, &errs)
		if (len(errs) == 0) != c.ok {
			t.Errorf("%s: refusals %v, want ok=%v", name, errs, c.ok)
		}
	}
}

// The manifests themselves: grab-service's Deployment with its allowlist removed,
// widened to a foreign host, or its connection bound dropped, is refused; and the
// recovery rebuild CronJob counting IPv6 buyers apart from grab-service.
func TestManifestsRefuseAWorkloadWithoutItsBounds(t *testing.T) {
	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	var errs Errs
	checkPlatform(&errs, t, objs)
	if len(errs) > 0 {
		t.Fatalf("the manifests as they are refused: %v", errs.Err())
	}
	editArgs := func(kind, name string, edit func(args []string) []string) []object {
		out := slices.Clone(objs)
		for i, o := range out {
			if o.kind != kind || o.meta.Name != name {
				continue
			}
			switch v := o.obj.(type) {
			case interface{ DeepCopyObject() runtime.Object }:
				c := v.DeepCopyObject()
				spec := podSpec(object{obj: c})
				spec.Containers[0].Args = edit(slices.Clone(spec.Containers[0].Args))
				out[i].obj = c
			}
		}
		return out
	}
	drop := func(flag string) func([]string) []string {
		return func(a []string) []string {
			i := slices.Index(a, flag)
			return slices.Delete(a, i, i+2)
		}
	}
	set := func(flag, v string) func([]string) []string {
		return func(a []string) []string {
			a[slices.Index(a, flag)+1] = v
			return a
		}
	}
	for name, c := range map[string]struct {
		objs []object
		why  string
	}{
		"grab-service without --redis-allow":    {editArgs("Deployment", "grab-service", drop("--redis-allow")), "without --redis-allow"},
		"promo-admin allowing a foreign host":   {editArgs("Deployment", "promo-admin", set("--redis-allow", "redis-shard-*,redis.attacker.example")), "names no shard server"},
		"the flow sink without --max-conns":     {editArgs("Deployment", "flow-sink", drop("--max-conns")), "sets --max-conns explicitly"},
		"grab-service with no connection bound": {editArgs("Deployment", "grab-service", set("--max-conns", "0")), "--max-conns \"0\" outside"},
		"grab-service counting by a /56 alone": {editArgs("Deployment", "grab-service", func(a []string) []string {
			return append(a, "--ipv6-prefix", "56")
		}), "must count IPv6 buyers by the same prefix"},
	} {
		var errs Errs
		checkPlatform(&errs, t, c.objs)
		if !strings.Contains(strings.Join(errs, "\n"), c.why) {
			t.Errorf("%s: not refused for %q: %v", name, c.why, errs)
		}
	}
}
