package kafkaauth_test

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/flashsale/platform/internal/kafkaauth"
)

// Clients built with the environment's SCRAM credentials produce to and consume
// from a broker that requires SASL (kfake, in process); without them, or with a
// wrong password, the broker refuses.
func TestSCRAMAgainstABrokerThatRequiresIt(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "grab", "grab-secret-0123"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	auth := func(mech, pw string) kafkaauth.Auth {
		t.Helper()
		t.Setenv(kafkaauth.MechanismEnv, mech)
		t.Setenv(kafkaauth.UserEnv, "grab")
		t.Setenv(kafkaauth.PasswordEnv, pw)
		a, err := kafkaauth.FromEnv()
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	// The bound on the one attempt: the SCRAM exchange (thousands of hash rounds on
	// each side) is CPU work the race detector and a loaded machine slow many times,
	// so the write that must succeed has a long one; the refused writes fail either
	// way, by the broker's refusal or by the bound, and keep a short one.
	write := func(a kafkaauth.Auth, within time.Duration) error {
		w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "t", Transport: a.Transport(nil), MaxAttempts: 1,
			BatchTimeout: time.Millisecond, WriteTimeout: within}
		defer w.Close()
		ctx, cancel := context.WithTimeout(context.Background(), within+2*time.Second)
		defer cancel()
		return w.WriteMessages(ctx, kafka.Message{Value: []byte("x")})
	}
	good := auth("SCRAM-SHA-256", "grab-secret-0123")
	if err := write(good, 30*time.Second); err != nil {
		t.Fatalf("with the credentials: %v", err)
	}
	if err := write(auth("SCRAM-SHA-256", "wrong"), 3*time.Second); err == nil {
		t.Error("a wrong password produced")
	}
	if err := write(kafkaauth.Auth{}, 3*time.Second); err == nil {
		t.Error("no SASL produced to a broker that requires it")
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: "t", Partition: 0, Dialer: good.Dialer(30 * time.Second), MaxWait: 100 * time.Millisecond})
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if m, err := r.ReadMessage(ctx); err != nil || string(m.Value) != "x" {
		t.Fatalf("consume with the credentials: %q %v", m.Value, err)
	}
}

// Bad settings are refused at start, with the variable named.
func TestFromEnvRefusesBadSettings(t *testing.T) {
	for _, c := range []struct{ mech, user, pw, tls string }{
		{"PLAIN", "u", "p", ""},
		{"SCRAM-SHA-256", "", "p", ""},
		{"SCRAM-SHA-256", "u", "", ""},
		{"", "", "", "maybe"},
	} {
		t.Setenv(kafkaauth.MechanismEnv, c.mech)
		t.Setenv(kafkaauth.UserEnv, c.user)
		t.Setenv(kafkaauth.PasswordEnv, c.pw)
		t.Setenv(kafkaauth.TLSEnv, c.tls)
		if _, err := kafkaauth.FromEnv(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
