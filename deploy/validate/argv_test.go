package validate

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// podTemplate is a workload's pod template, nil for other kinds.
func podTemplate(o object) *corev1.PodTemplateSpec {
	switch v := o.obj.(type) {
	case *appsv1.Deployment:
		return &v.Spec.Template
	case *appsv1.StatefulSet:
		return &v.Spec.Template
	case *batchv1.Job:
		return &v.Spec.Template
	case *batchv1.CronJob:
		return &v.Spec.JobTemplate.Spec.Template
	}
	return nil
}

// podSpec is the pod template's spec of a workload, nil for other kinds.
func podSpec(o object) *corev1.PodSpec {
	if t := podTemplate(o); t != nil {
		return &t.Spec
	}
	return nil
}

// execCommands are the commands a container runs: its command and args, its probes'
// and its lifecycle hooks' exec commands, each by what it is.
func execCommands(c corev1.Container) map[string]string {
	out := map[string]string{"command": strings.Join(append(slices.Clone(c.Command), c.Args...), "\n")}
	for name, p := range map[string]*corev1.Probe{"readiness probe": c.ReadinessProbe, "liveness probe": c.LivenessProbe, "startup probe": c.StartupProbe} {
		if p != nil && p.Exec != nil {
			out[name] = strings.Join(p.Exec.Command, "\n")
		}
	}
	if l := c.Lifecycle; l != nil {
		for name, h := range map[string]*corev1.LifecycleHandler{"postStart": l.PostStart, "preStop": l.PreStop} {
			if h != nil && h.Exec != nil {
				out[name] = strings.Join(h.Exec.Command, "\n")
			}
		}
	}
	return out
}

// No secret on a command line: no container, probe or hook of the Kubernetes
// manifests or the compose file passes a password in argv (CheckNoSecretInArgv).
func TestNoSecretInArgv(t *testing.T) {
	var errs Errs
	objs := loadManifests(t)
	if t.Failed() {
		return
	}
	for _, o := range objs {
		spec := podSpec(o)
		if spec == nil {
			continue
		}
		for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
			for what, cmd := range execCommands(c) {
				for _, e := range CheckNoSecretInArgv(cmd) {
					errs.Addf("%s container %s, %s: %s", o.where(), c.Name, what, e)
				}
			}
		}
	}
	p, err := loadCompose(t, composeEnv(t), "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range p.Services {
		cmds := map[string]string{"entrypoint and command": strings.Join(append(slices.Clone([]string(s.Entrypoint)), s.Command...), "\n")}
		if s.HealthCheck != nil {
			cmds["healthcheck"] = strings.Join(s.HealthCheck.Test, "\n")
		}
		for what, cmd := range cmds {
			for _, e := range CheckNoSecretInArgv(cmd) {
				errs.Addf("compose %s, %s: %s", s.Name, what, e)
			}
		}
	}
	if err := errs.Err(); err != nil {
		t.Error(err)
	}
}

func TestArgvCheckRefusesSecretsOnCommandLines(t *testing.T) {
	for _, bad := range []string{
		"/bin/sh\n-c\nmysqladmin ping -h 127.0.0.1 -uroot -p\"$MYSQL_ROOT_PASSWORD\" --silent",
		"mysql -uroot -psecret",
		"kafka-storage.sh format --add-scram \"SCRAM-SHA-512=[name=broker,password=$KAFKA_BROKER_PASSWORD]\"",
		"x=1\nkafka-configs.sh --alter --add-config 'SCRAM-SHA-512=[password=abc]'",
		"redis-cli -a \"$REDIS_PASSWORD\" ping",
		"redis-server --requirepass \"$P\"",
		"curl --password \"$P\" http://x",
		"cat <<EOF\nfine password=$X\nEOF\nmysql -p\"$P\"",
	} {
		if len(CheckNoSecretInArgv(bad)) == 0 {
			t.Errorf("accepted %q", bad)
		}
	}
	for _, good := range []string{
		"MYSQL_PWD=\"$MYSQL_ROOT_PASSWORD\" mysqladmin ping -h 127.0.0.1 -uroot --silent",
		"export KAFKA_JAAS=\"org.x required username=\\\"broker\\\" password=\\\"$P\\\";\"\nexec run",
		"cat > /tmp/scram.args <<EOF\n--add-scram\nSCRAM-SHA-512=[name=broker,password=$P]\nEOF\nkafka-storage.sh format @/tmp/scram.args",
		"exec redis-server - \"$@\" <<EOF\nrequirepass $REDISCLI_AUTH\nEOF",
		"redis-cli\n-p\n26379\nping",
		"mkdir -p /tmp/x && redis-server --protected-mode no",
	} {
		if e := CheckNoSecretInArgv(good); len(e) > 0 {
			t.Errorf("refused %q: %v", good, e)
		}
	}
}
