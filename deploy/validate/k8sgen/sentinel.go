package k8sgen

import (
	"fmt"
	"strconv"
	"strings"
)

// Sentinels is the number of Redis Sentinels: odd, so a quorum of SentinelQuorum
// survives one lost.
const Sentinels = 3

// Sentinel settings: two must agree a master is down, after SentinelDownAfterMs
// without an answer.
const (
	SentinelQuorum      = 2
	SentinelDownAfterMs = 3000
	SentinelPrefix      = "shard-" // the services' --redis-sentinel-prefix default
	SentinelPort        = 26379
)

// SentinelFile is the generated manifest of the sentinels.
const SentinelFile = "deploy/k8s/21-redis-sentinels.generated.yaml"

// SentinelAddrs are the sentinels' addresses, as the services' --redis-sentinels.
func SentinelAddrs() []string {
	out := make([]string, Sentinels)
	for i := range out {
		out[i] = fmt.Sprintf("redis-sentinel-%d.redis-sentinel:%d", i, SentinelPort)
	}
	return out
}

// askSentinels is the shell that sets $master to the master the sentinels elected
// for shard (the variable $shard), when one of them answers with a host name.
func askSentinels() string {
	var peers []string
	for i := 0; i < Sentinels; i++ {
		peers = append(peers, fmt.Sprintf("redis-sentinel-%d", i))
	}
	return `master=""
for peer in ` + strings.Join(peers, " ") + `; do
  [ "$peer" = "$HOSTNAME" ] && continue
  master=$(timeout 3 redis-cli ` + RedisCLITLS + ` -h "$peer.redis-sentinel" -p ` + strconv.Itoa(SentinelPort) + ` sentinel get-master-addr-by-name "` + SentinelPrefix + `$shard" 2>/dev/null | head -n1)
  case $master in ''|*[!a-z0-9.-]*) master="" ;; *) break ;; esac
done
`
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// sentinelConf is the shell writing a fresh sentinel's config: the masters its peers
// elected (else pod 0 of each shard), the shards' default user to reach them, and an
// ACL user per service that may only ask where a master is.
func sentinelConf() string {
	ask := strings.ReplaceAll(askSentinels(), "\n", "\n    ")
	return fmt.Sprintf(`umask 077
conf=/data/sentinel.conf
if [ ! -f "$conf" ]; then
  cat > "$conf.new" <<EOF
port 0
tls-port %[1]d
tls-cert-file /tls/tls.crt
tls-key-file /tls/tls.key
tls-ca-cert-file /tls/ca.crt
tls-auth-clients no
tls-replication yes
dir /data
protected-mode no
requirepass $REDISCLI_AUTH
sentinel sentinel-pass $REDISCLI_AUTH
sentinel resolve-hostnames yes
sentinel announce-hostnames yes
sentinel announce-ip $HOSTNAME.redis-sentinel.%[2]s.svc.cluster.local
user grab-service on >$REDIS_GRAB_PASSWORD -@all +auth +hello +ping +sentinel|get-master-addr-by-name
user promo-admin on >$REDIS_ADMIN_PASSWORD -@all +auth +hello +ping +sentinel|get-master-addr-by-name
user recovery on >$REDIS_RECOVERY_PASSWORD -@all +auth +hello +ping +sentinel|get-master-addr-by-name
EOF
  shard=0
  while [ "$shard" -lt %[3]d ]; do
    %[4]s: "${master:=redis-shard-$shard-0.redis-shard-$shard.%[2]s.svc.cluster.local}"
    name=%[5]s$shard
    printf 'sentinel monitor %%s %%s 6379 %[6]d\n' "$name" "$master"
    printf 'sentinel auth-pass %%s %%s\n' "$name" "$REDISCLI_AUTH"
    printf 'sentinel down-after-milliseconds %%s %[7]d\n' "$name"
    printf 'sentinel failover-timeout %%s 30000\n' "$name"
    printf 'sentinel parallel-syncs %%s 1\n' "$name"
    shard=$((shard + 1))
  done >> "$conf.new"
  mv "$conf.new" "$conf"
fi
exec redis-server "$conf" --sentinel
`, SentinelPort, Namespace, Shards, ask, SentinelPrefix, SentinelQuorum, SentinelDownAfterMs)
}

func sentinels() []byte {
	var b strings.Builder
	b.WriteString(header)
	fmt.Fprintf(&b, `# %[1]d Redis Sentinels watching the %[2]d shards' masters as %[3]s0..%[3]s%[4]d: %[5]d must
# agree a master is down (%[6]d ms without an answer) before one of its replicas is
# promoted. The services follow the masters they elect (--redis-sentinels); the flow
# sink's healer rebuilds the promoted replica from the record (deploy/RUNBOOK.md, "A
# lost Redis master"). A sentinel keeps its config, failovers included, in /data, which
# outlives a container restart; a new pod asks its peers for the current masters.
---
apiVersion: v1
kind: Service
metadata:
  name: redis-sentinel
  namespace: %[7]s
  labels: {app.kubernetes.io/name: redis-sentinel, app.kubernetes.io/part-of: flashsale}
spec:
  clusterIP: None
  publishNotReadyAddresses: true
  selector: {app.kubernetes.io/name: redis-sentinel}
  ports:
    - {name: sentinel, port: %[8]d, targetPort: sentinel}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: redis-sentinel
  namespace: %[7]s
  labels: {app.kubernetes.io/name: redis-sentinel, app.kubernetes.io/part-of: flashsale}
spec:
  serviceName: redis-sentinel
  replicas: %[1]d
  podManagementPolicy: Parallel
  selector:
    matchLabels: {app.kubernetes.io/name: redis-sentinel}
  template:
    metadata:
      labels: {app.kubernetes.io/name: redis-sentinel, app.kubernetes.io/part-of: flashsale}
    spec:
      terminationGracePeriodSeconds: 10
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: topology.kubernetes.io/zone
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels: {app.kubernetes.io/name: redis-sentinel}
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: DoNotSchedule
          labelSelector:
            matchLabels: {app.kubernetes.io/name: redis-sentinel}
      automountServiceAccountToken: false
      securityContext: {runAsNonRoot: true, runAsUser: 999, runAsGroup: 999, fsGroup: 999, seccompProfile: {type: RuntimeDefault}}
      containers:
        - name: sentinel
          image: %[9]s
          command: ["/bin/sh", "-ec"]
          args:
            - |
%[10]s          env:
            - {name: REDISCLI_AUTH, valueFrom: {secretKeyRef: {name: flashsale-secrets, key: redis-password}}}
            - {name: REDIS_GRAB_PASSWORD, valueFrom: {secretKeyRef: {name: flashsale-secrets, key: redis-grab-password}}}
            - {name: REDIS_ADMIN_PASSWORD, valueFrom: {secretKeyRef: {name: flashsale-secrets, key: redis-admin-password}}}
            - {name: REDIS_RECOVERY_PASSWORD, valueFrom: {secretKeyRef: {name: flashsale-secrets, key: redis-recovery-password}}}
          ports:
            - {name: sentinel, containerPort: %[8]d}
          resources:
            requests: {cpu: 100m, memory: 64Mi}
            limits: {memory: 128Mi}
          readinessProbe:
            exec: {command: ["redis-cli", "--tls", "--cacert", "/tls/ca.crt", "-p", "%[8]d", "ping"]}
            periodSeconds: 5
            timeoutSeconds: 2
          livenessProbe:
            tcpSocket: {port: sentinel}
            initialDelaySeconds: 10
            periodSeconds: 10
          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
          volumeMounts:
            - {name: data, mountPath: /data}
            - {name: tls, mountPath: /tls, readOnly: true}
      volumes:
        - name: data
          emptyDir: {}
        - name: tls
          secret: {secretName: %[11]s, defaultMode: 0440}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: redis-sentinel
  namespace: %[7]s
spec:
  maxUnavailable: 1
  selector:
    matchLabels: {app.kubernetes.io/name: redis-sentinel}
`, Sentinels, Shards, SentinelPrefix, Shards-1, SentinelQuorum, SentinelDownAfterMs, Namespace, SentinelPort, RedisImage,
		indent(sentinelConf(), "              "), RedisTLSSecret)
	return []byte(b.String())
}
