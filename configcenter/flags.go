package configcenter

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/flashsale/platform/internal/svc"
)

// Environment of the TLS to Nacos, as the deploy files set it: "true" turns it on,
// trusting the CAs of the PEM file the second names.
const (
	NacosTLSEnv = "FLASHSALE_NACOS_TLS"
	NacosCAEnv  = "FLASHSALE_NACOS_CA_FILE"
)

// NacosFlags are a service's config-center flags. With --nacos set, Nacos is the
// source of the switches; otherwise the local stack's file is.
type NacosFlags struct {
	Addr, Namespace, Group, DataID, Username string
	Poll                                     time.Duration
	TLS                                      optBool // --nacos-tls; unset: NacosTLSEnv
	CAFile                                   string  // --nacos-ca-file; empty: NacosCAEnv
}

// RegisterNacosFlags binds the flags on fs.
func RegisterNacosFlags(fs *flag.FlagSet) *NacosFlags {
	f := &NacosFlags{}
	fs.StringVar(&f.Addr, "nacos", "", "Nacos server host:port (main port; gRPC on port+1000); when set, the switches come from Nacos instead of --switches")
	fs.StringVar(&f.Namespace, "nacos-namespace", "", "Nacos namespace id of the switches document (empty = public)")
	fs.StringVar(&f.Group, "nacos-group", Group, "Nacos group of the switches document")
	fs.StringVar(&f.DataID, "nacos-data-id", DataID, "Nacos dataId of the switches document")
	fs.StringVar(&f.Username, "nacos-username", "", "Nacos username (password from FLASHSALE_NACOS_PASSWORD)")
	fs.DurationVar(&f.Poll, "nacos-poll", time.Second, "interval of the read that catches pushes the SDK loses")
	fs.Var(&f.TLS, "nacos-tls", "HTTPS and gRPC over TLS to Nacos (default from "+NacosTLSEnv+")")
	fs.StringVar(&f.CAFile, "nacos-ca-file", "", "PEM of the CAs that sign Nacos' certificate, required with TLS (default from "+NacosCAEnv+")")
	return f
}

// optBool is a boolean flag that knows whether it was given.
type optBool struct{ set, on bool }

func (b *optBool) String() string   { return strconv.FormatBool(b.on) }
func (b *optBool) IsBoolFlag() bool { return true }
func (b *optBool) Set(v string) error {
	on, err := strconv.ParseBool(v)
	if err != nil {
		return fmt.Errorf("want true or false")
	}
	b.set, b.on = true, on
	return nil
}

// NacosTLSFromEnv reads NacosTLSEnv and NacosCAEnv as internal/svc reads Redis's:
// a value other than a boolean, or (with TLS on) a CA file unreadable or without a
// certificate, is an error. caFile is returned even with TLS off, for a flag to turn it on.
func NacosTLSFromEnv() (on bool, caFile string, err error) {
	cfg, err := svc.TLSFromEnv(NacosTLSEnv, NacosCAEnv)
	if err != nil {
		return false, "", err
	}
	return cfg != nil, os.Getenv(NacosCAEnv), nil
}

// config is the NacosConfig the flags and the environment say; a bad TLS setting
// is an error here, before anything connects.
func (f *NacosFlags) config(log *slog.Logger) (NacosConfig, error) {
	on, ca, err := NacosTLSFromEnv()
	if err != nil {
		return NacosConfig{}, err
	}
	if f.TLS.set {
		on = f.TLS.on
	}
	if f.CAFile != "" {
		ca = f.CAFile
	}
	c := NacosConfig{Addr: f.Addr, Namespace: f.Namespace, Group: f.Group, DataID: f.DataID, Username: f.Username,
		Password: os.Getenv("FLASHSALE_NACOS_PASSWORD"), Poll: f.Poll, TLS: on, CAFile: ca, Log: log}
	if _, _, err := c.sdkTLS(); err != nil {
		return NacosConfig{}, err
	}
	return c, nil
}

// Source returns the source the flags choose: Nacos, or the file at path. It is
// main's to call: the password and TLS come from the environment here, once, and
// the source itself never reads the environment.
func (f *NacosFlags) Source(path string, log *slog.Logger) (Source, error) {
	if f.Addr == "" {
		return FileSource{Path: path}, nil
	}
	if f.Poll <= 0 {
		f.Poll = time.Second // the guard against lost pushes is not optional in a service
	}
	c, err := f.config(log)
	if err != nil {
		return nil, err
	}
	return NewNacosSource(c), nil
}

// Store returns the store the flags choose, for a one-shot read (bin/recovery
// reads where each shard's server is): Nacos, or the file at path.
func (f *NacosFlags) Store(path string, log *slog.Logger) (Store, error) {
	if f.Addr == "" {
		return FileStore{Path: path}, nil
	}
	c, err := f.config(log)
	if err != nil {
		return nil, err
	}
	return NewNacosStore(c)
}

// ReadSwitches reads and validates the document in store once; an empty store
// gives the defaults.
func ReadSwitches(ctx context.Context, store Store) (*Snapshot, error) {
	doc, err := store.Get(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the switches (%s): %w", store.Describe(), err)
	}
	if len(doc.Content) == 0 {
		return &Snapshot{Switches: Default(), MD5: "default"}, nil
	}
	return Parse(doc.Content)
}
