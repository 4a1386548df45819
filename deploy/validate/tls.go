package validate

import (
	"fmt"
	"regexp"
	"strings"
)

// Every hop inside the platform speaks TLS: the Redis shards and sentinels (TLS only,
// replication too), MySQL (every TCP connection), Nacos (HTTPS and gRPC), Kafka
// (SASL_SSL, checked in hardening.go), and the public API behind an ingress or proxy
// that terminates TLS. The Go services read their side from the environment.

// RedisTLSDirectives are what a Redis server's or sentinel's config must say: TLS on
// its port, the plaintext port off, and TLS to the master it replicates or watches.
var RedisTLSDirectives = []string{"port 0", "tls-port ", "tls-cert-file ", "tls-key-file ", "tls-ca-cert-file ", "tls-replication yes"}

// CheckRedisTLSConf lists what a Redis or Sentinel config (as a start script writes
// it) lacks of RedisTLSDirectives, and a plaintext port it opens.
func CheckRedisTLSConf(conf string) []string {
	var out []string
	for _, d := range RedisTLSDirectives {
		if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(d)).MatchString(conf) {
			out = append(out, fmt.Sprintf("no %q: the server must speak TLS only", strings.TrimSpace(d)))
		}
	}
	if m := regexp.MustCompile(`(?m)^\s*port [1-9][0-9]*\s*$`).FindString(conf); m != "" {
		out = append(out, fmt.Sprintf("%q opens a plaintext port", strings.TrimSpace(m)))
	}
	if regexp.MustCompile(`(?m)^\s*tls-replication no`).MatchString(conf) {
		out = append(out, "tls-replication no: replication would be plaintext")
	}
	return out
}

// Environment of the services' TLS to their backends. Redis's is read by
// internal/svc (RedisTLSEnv, RedisCAEnv); MySQL's CA and Nacos' TLS are named here for
// the services to read (deploy/RUNBOOK.md, "TLS inside").
const (
	RedisTLSEnv   = "FLASHSALE_REDIS_TLS"
	RedisCAEnv    = "FLASHSALE_REDIS_CA_FILE"
	MySQLCAEnv    = "FLASHSALE_MYSQL_CA_FILE"
	NacosTLSEnv   = "FLASHSALE_NACOS_TLS"
	NacosCAEnv    = "FLASHSALE_NACOS_CA_FILE"
	mysqlTLSParam = "tls"
)

// CheckMySQLDSNTLS: a DSN (go-sql-driver form) asks for verified TLS: tls=true or a
// registered config's name; never absent, false, skip-verify or preferred (which
// falls back to plaintext).
func CheckMySQLDSNTLS(dsn string) error {
	_, query, _ := strings.Cut(dsn, "?")
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if k != mysqlTLSParam {
			continue
		}
		switch strings.ToLower(v) {
		case "", "false", "skip-verify", "preferred":
			return fmt.Errorf("the MySQL DSN has tls=%s: want tls=true (verified against %s)", v, MySQLCAEnv)
		}
		return nil
	}
	return fmt.Errorf("the MySQL DSN has no tls= parameter: the services would talk to MySQL in plaintext")
}

// CheckTLSEnv checks a service container's environment (literal values; "" for
// valueFrom) for TLS to the backends it uses; caFile reports whether a path is a file
// the container mounts.
func CheckTLSEnv(env map[string]string, redis, nacos bool, caFile func(string) bool) []string {
	var out []string
	need := func(on, ca string) {
		if env[on] != "true" {
			out = append(out, fmt.Sprintf("%s=%q, want \"true\"", on, env[on]))
		}
		if !caFile(env[ca]) {
			out = append(out, fmt.Sprintf("%s=%q is no file the container mounts (the backend's CA)", ca, env[ca]))
		}
	}
	if redis {
		need(RedisTLSEnv, RedisCAEnv)
	}
	if nacos {
		need(NacosTLSEnv, NacosCAEnv)
	}
	if dsn, ok := env[MySQLEnv]; ok {
		if err := CheckMySQLDSNTLS(dsn); err != nil {
			out = append(out, err.Error())
		}
		if !caFile(env[MySQLCAEnv]) {
			out = append(out, fmt.Sprintf("%s=%q is no file the container mounts (MySQL's CA)", MySQLCAEnv, env[MySQLCAEnv]))
		}
	}
	return out
}
