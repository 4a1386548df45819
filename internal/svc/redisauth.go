package svc

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// RedisAuth is how the services prove themselves to the shards: an ACL user (Redis
// 6+; the user "default" with requirepass alone) and, optionally, TLS. Production
// gives each service a user of its own with the commands it needs (deploy/).
type RedisAuth struct {
	Username, Password string
	TLS                *tls.Config // nil: plain TCP
}

// Environment of RedisAuthFromEnv; the password may come from a file (Secret).
const (
	RedisUserEnv     = "FLASHSALE_REDIS_USERNAME"
	RedisPasswordEnv = "FLASHSALE_REDIS_PASSWORD"
	RedisTLSEnv      = "FLASHSALE_REDIS_TLS"     // "true": TLS to every shard
	RedisCAEnv       = "FLASHSALE_REDIS_CA_FILE" // PEM of the CAs to trust (default: the system's)
)

// RedisAuthFromEnv reads RedisAuth from the environment; all unset is none (the local stack).
func RedisAuthFromEnv() (RedisAuth, error) {
	pw, err := Secret(RedisPasswordEnv)
	if err != nil {
		return RedisAuth{}, err
	}
	a := RedisAuth{Username: os.Getenv(RedisUserEnv), Password: pw}
	if a.Username != "" && a.Password == "" {
		return RedisAuth{}, fmt.Errorf("%s is set without %s", RedisUserEnv, RedisPasswordEnv)
	}
	on, err := strconv.ParseBool(os.Getenv(RedisTLSEnv))
	if os.Getenv(RedisTLSEnv) != "" && err != nil {
		return RedisAuth{}, fmt.Errorf("%s=%q: want true or false", RedisTLSEnv, os.Getenv(RedisTLSEnv))
	}
	if !on {
		return a, nil
	}
	a.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	if file := os.Getenv(RedisCAEnv); file != "" {
		pem, err := os.ReadFile(file)
		if err != nil {
			return RedisAuth{}, fmt.Errorf("%s: %w", RedisCAEnv, err)
		}
		a.TLS.RootCAs = x509.NewCertPool()
		if !a.TLS.RootCAs.AppendCertsFromPEM(pem) {
			return RedisAuth{}, fmt.Errorf("%s: no PEM certificate in %s", RedisCAEnv, file)
		}
	}
	return a, nil
}

// Apply sets the credentials and TLS on a client template.
func (a RedisAuth) Apply(o *redis.Options) {
	o.Username, o.Password, o.TLSConfig = a.Username, a.Password, a.TLS
}
