// Package kafkaauth is how the services prove themselves to Kafka: SASL/SCRAM
// and TLS, from the environment, applied to every kafka-go client they make
// (producers, consumers, the admin reads of the lag meter). All unset is plain
// TCP without SASL: the local stack.
package kafkaauth

import (
	"crypto/tls"
	"fmt"
	"os"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/flashsale/platform/internal/svc"
)

// Environment of FromEnv; the password may come from a file (svc.Secret).
const (
	MechanismEnv = "FLASHSALE_KAFKA_SASL_MECHANISM" // SCRAM-SHA-256 or SCRAM-SHA-512
	UserEnv      = "FLASHSALE_KAFKA_USERNAME"
	PasswordEnv  = "FLASHSALE_KAFKA_PASSWORD"
	TLSEnv       = "FLASHSALE_KAFKA_TLS"     // "true": TLS to every broker
	CAEnv        = "FLASHSALE_KAFKA_CA_FILE" // PEM of the CAs to trust (default: the system's)
)

// Auth is SASL and TLS for Kafka clients; the zero value is neither.
type Auth struct {
	SASL sasl.Mechanism
	TLS  *tls.Config
}

// FromEnv reads Auth from the environment.
func FromEnv() (Auth, error) {
	var a Auth
	if mech := os.Getenv(MechanismEnv); mech != "" {
		pw, err := svc.Secret(PasswordEnv)
		if err != nil {
			return Auth{}, err
		}
		user := os.Getenv(UserEnv)
		if user == "" || pw == "" {
			return Auth{}, fmt.Errorf("%s=%s needs %s and %s", MechanismEnv, mech, UserEnv, PasswordEnv)
		}
		algo := map[string]scram.Algorithm{"SCRAM-SHA-256": scram.SHA256, "SCRAM-SHA-512": scram.SHA512}[mech]
		if algo == nil {
			return Auth{}, fmt.Errorf("%s=%q: want SCRAM-SHA-256 or SCRAM-SHA-512", MechanismEnv, mech)
		}
		m, err := scram.Mechanism(algo, user, pw)
		if err != nil {
			return Auth{}, fmt.Errorf("%s: %w", MechanismEnv, err)
		}
		a.SASL = m
	}
	tlsConfig, err := svc.TLSFromEnv(TLSEnv, CAEnv)
	if err != nil {
		return Auth{}, err
	}
	a.TLS = tlsConfig
	return a, nil
}

// Transport is a kafka-go transport (for Writer and Client) with the auth, built
// on t (nil: a new one).
func (a Auth) Transport(t *kafka.Transport) *kafka.Transport {
	if t == nil {
		t = &kafka.Transport{}
	}
	t.SASL, t.TLS = a.SASL, a.TLS
	return t
}

// Dialer is a kafka-go dialer (for Reader and direct connections) with the auth.
func (a Auth) Dialer(timeout time.Duration) *kafka.Dialer {
	return &kafka.Dialer{Timeout: timeout, DualStack: true, SASLMechanism: a.SASL, TLS: a.TLS}
}

// BackendsFromEnv reads the credentials of both backends a service's shard
// clients and Kafka clients use: the Redis ones (svc.RedisAuthFromEnv) and Kafka's
// (FromEnv).
func BackendsFromEnv() (svc.RedisAuth, Auth, error) {
	redis, err := svc.RedisAuthFromEnv()
	if err != nil {
		return redis, Auth{}, err
	}
	kafka, err := FromEnv()
	return redis, kafka, err
}
