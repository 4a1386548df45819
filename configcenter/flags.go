package configcenter

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"
)

// NacosFlags are a service's config-center flags. With --nacos set, Nacos is the
// source of the switches; otherwise the local stack's file is.
type NacosFlags struct {
	Addr, Namespace, Group, DataID, Username string
	Poll                                     time.Duration
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
	return f
}

// Source returns the source the flags choose: Nacos, or the file at path. It is
// main's to call: the password comes from the environment here, once, and the
// source itself never reads the environment.
func (f *NacosFlags) Source(path string, log *slog.Logger) Source {
	if f.Addr == "" {
		return FileSource{Path: path}
	}
	if f.Poll <= 0 {
		f.Poll = time.Second // the guard against lost pushes is not optional in a service
	}
	return NewNacosSource(NacosConfig{Addr: f.Addr, Namespace: f.Namespace, Group: f.Group, DataID: f.DataID,
		Username: f.Username, Password: os.Getenv("FLASHSALE_NACOS_PASSWORD"), Poll: f.Poll, Log: log})
}

// Store returns the store the flags choose, for a one-shot read (bin/recovery
// reads where each shard's server is): Nacos, or the file at path.
func (f *NacosFlags) Store(path string, log *slog.Logger) (Store, error) {
	if f.Addr == "" {
		return FileStore{Path: path}, nil
	}
	return NewNacosStore(NacosConfig{Addr: f.Addr, Namespace: f.Namespace, Group: f.Group, DataID: f.DataID,
		Username: f.Username, Password: os.Getenv("FLASHSALE_NACOS_PASSWORD"), Log: log})
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
