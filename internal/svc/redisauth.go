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
	a.TLS, err = TLSFromEnv(RedisTLSEnv, RedisCAEnv)
	if err != nil {
		return RedisAuth{}, err
	}
	return a, nil
}

// TLSFromEnv is the client TLS the variable onEnv ("true") asks for, trusting the
// CAs of the PEM file caEnv names (default: the system's); nil when TLS is off.
func TLSFromEnv(onEnv, caEnv string) (*tls.Config, error) {
	v := os.Getenv(onEnv)
	if v == "" {
		return nil, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: want true or false", onEnv, v)
	}
	if !on {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if file := os.Getenv(caEnv); file != "" {
		pem, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", caEnv, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate in %s", caEnv, file)
		}
	}
	return cfg, nil
}

// Apply sets the credentials and TLS on a client template.
func (a RedisAuth) Apply(o *redis.Options) {
	o.Username, o.Password, o.TLSConfig = a.Username, a.Password, a.TLS
}
