package configcenter

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/config_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	sdktls "github.com/nacos-group/nacos-sdk-go/v2/common/tls"
	"github.com/nacos-group/nacos-sdk-go/v2/util"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// NacosConfig says where the switches document lives in Nacos and how to reach it.
// main fills it from flags; nothing here reads the environment.
type NacosConfig struct {
	// Addr is host:port of the server's main port; gRPC is on port+1000 unless GRPCPort is set.
	Addr      string
	GRPCPort  uint64
	Namespace string // the tenant; "" is the public namespace
	Group     string // default Group
	DataID    string // default DataID
	// Username and Password, when set, log in over HTTP on the main port first.
	Username, Password string
	// Timeout bounds one request to the server (default 3 s), so a hung server
	// delays a poll, never stops it.
	Timeout time.Duration
	// Poll is the interval of the GetConfig guard against lost pushes (default 1 s).
	// Negative turns the guard off: only the regression test of that defect does so.
	Poll time.Duration
	// TLS speaks HTTPS to the main port (the login) and TLS to gRPC (every read and
	// listen), verifying the server against the PEM CAs in CAFile. CAFile is
	// required with TLS and ignored without it.
	TLS    bool
	CAFile string
	// CacheDir and LogDir are where the SDK writes its cache files and its own log
	// (defaults under the system temporary directory).
	CacheDir, LogDir string
	Log              *slog.Logger
}

func (c NacosConfig) withDefaults() NacosConfig {
	if c.Group == "" {
		c.Group = Group
	}
	if c.DataID == "" {
		c.DataID = DataID
	}
	if c.Timeout <= 0 {
		c.Timeout = 3 * time.Second
	}
	if c.Poll == 0 {
		c.Poll = time.Second
	}
	if c.CacheDir == "" {
		c.CacheDir = filepath.Join(os.TempDir(), "flashsale-nacos", "cache")
	}
	if c.LogDir == "" {
		c.LogDir = filepath.Join(os.TempDir(), "flashsale-nacos", "log")
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return c
}

// NewNacosClient makes an SDK config client. It does not connect yet: the SDK
// connects on the first request and reconnects by itself afterwards.
func NewNacosClient(c NacosConfig) (config_client.IConfigClient, error) {
	c = c.withDefaults()
	host, portStr, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return nil, fmt.Errorf("nacos address %q: want host:port: %w", c.Addr, err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, fmt.Errorf("nacos address %q: bad port", c.Addr)
	}
	tlsCfg, scheme, err := c.sdkTLS()
	if err != nil {
		return nil, err
	}
	cc := constant.ClientConfig{
		NamespaceId: c.Namespace,
		TimeoutMs:   uint64(c.Timeout.Milliseconds()),
		CacheDir:    c.CacheDir,
		LogDir:      c.LogDir,
		LogLevel:    "warn",
		// A failed read must be an error we see, not a stale file the SDK reads
		// instead; the last good snapshot is already in memory.
		DisableUseSnapShot:  true,
		NotLoadCacheAtStart: true,
		Username:            c.Username,
		Password:            c.Password,
		TLSCfg:              tlsCfg,
	}
	sc := []constant.ServerConfig{{Scheme: scheme, IpAddr: host, Port: port, GrpcPort: c.GRPCPort, ContextPath: "/nacos"}}
	routeSDKLog(c.Log)
	// util.LocalIP caches the host's address in a plain variable on first use;
	// clients connecting at once would race to fill it, so it is filled here once.
	localIPOnce.Do(func() { _ = util.LocalIP() })
	client, err := clients.NewConfigClient(vo.NacosClientParam{ClientConfig: &cc, ServerConfigs: sc})
	if err != nil {
		return nil, fmt.Errorf("nacos client for %s: %w", c.Addr, err)
	}
	routeSDKLog(c.Log)
	return client, nil
}

var localIPOnce sync.Once

// sdkTLS is the SDK's TLS setting and URL scheme for c. The SDK (2.3.2) reads one
// TLSConfig for both sides: its HTTP agent (the login) builds a tls.Config from it,
// and skips verification when CaFile is empty, so TLS without a CA is refused here;
// its gRPC dial trusts the system's CAs plus CaFile, and ignores a CA file it cannot
// read, so the file is read here once, as the HTTP side will, to fail at start.
func (c NacosConfig) sdkTLS() (constant.TLSConfig, string, error) {
	// Appointed: otherwise the gRPC side takes its TLS from the SDK's own
	// nacos_remote_client_rpc_tls_* environment, over what we set.
	t := constant.TLSConfig{Appointed: true}
	if !c.TLS {
		return t, "http", nil
	}
	if c.CAFile == "" {
		return t, "", fmt.Errorf("nacos TLS for %s: no CA file (%s or --nacos-ca-file): the server's certificate could not be verified", c.Addr, NacosCAEnv)
	}
	t.Enable, t.CaFile = true, c.CAFile
	if _, err := sdktls.NewTLS(t); err != nil {
		return t, "", fmt.Errorf("nacos TLS for %s: CA file %s: %w", c.Addr, c.CAFile, err)
	}
	return t, "https", nil
}

// NacosSource follows the switches document in Nacos: the SDK's listener for
// speed, and a GetConfig poll every Poll because the SDK can lose a push that
// lands while one of its batch-listen calls is in flight (it then marks the key
// in sync and only finds out at its 5-minute full sync).
type NacosSource struct {
	cfg NacosConfig
}

// NewNacosSource returns a source for the document cfg names.
func NewNacosSource(cfg NacosConfig) *NacosSource {
	return &NacosSource{cfg: cfg.withDefaults()}
}

// Describe names the document for logs and tools.
func (s *NacosSource) Describe() string {
	return fmt.Sprintf("nacos://%s/%s/%s/%s", s.cfg.Addr, s.cfg.Namespace, s.cfg.Group, s.cfg.DataID)
}

// Watch implements Source: a read at start, then every document the listener
// delivers, and a read every Poll. The SDK limits reads of one key to 5 a second
// per process, so a push is applied as delivered rather than read again.
func (s *NacosSource) Watch(ctx context.Context, apply func(doc []byte)) error {
	client, err := NewNacosClient(s.cfg)
	if err != nil {
		return err
	}
	defer client.CloseClient()
	push := &latest{wake: make(chan struct{}, 1)}
	// Listen before the first read: the SDK's first listen round then includes the
	// key (about 0.1 s after connecting) instead of waiting for its 5 s loop.
	if err := client.ListenConfig(vo.ConfigParam{DataId: s.cfg.DataID, Group: s.cfg.Group, OnChange: func(_, _, _, data string) {
		push.put(data)
	}}); err != nil {
		return fmt.Errorf("listen to %s: %w", s.Describe(), err)
	}
	var tick <-chan time.Time
	if s.cfg.Poll > 0 {
		t := time.NewTicker(s.cfg.Poll)
		defer t.Stop()
		tick = t.C
	}
	f := &feed{src: s, apply: apply}
	read := true // the start-up read
	for {
		if read {
			content, err := client.GetConfig(vo.ConfigParam{DataId: s.cfg.DataID, Group: s.cfg.Group})
			select {
			case <-push.wake:
				// Pushed while the read was in flight, so possibly newer than what the
				// read saw: the push wins, and the next poll looks again.
				f.take(ctx, push.get(), nil)
			default:
				f.take(ctx, content, err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-push.wake:
			f.take(ctx, push.get(), nil)
			read = false
		case <-tick:
			read = true
		}
	}
}

// latest holds the last document the listener delivered; wake says there is one.
type latest struct {
	mu   sync.Mutex
	doc  string
	wake chan struct{}
}

func (l *latest) put(doc string) {
	l.mu.Lock()
	l.doc = doc
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // already signalled; get returns this newer doc
	}
}

func (l *latest) get() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.doc
}

// feed passes each new document on once and logs each change of condition once,
// not every poll of a long outage.
type feed struct {
	src   *NacosSource
	apply func(doc []byte)
	last  string // md5 of the last document passed on
	state string
}

func (f *feed) take(ctx context.Context, content string, err error) {
	switch {
	case err != nil:
		f.report(ctx, "unreadable", slog.LevelWarn, "switches document unreadable in Nacos; keeping the last good one", "err", err.Error())
	case content == "":
		// Deleted or never published: an absent document changes nothing.
		f.last = ""
		f.report(ctx, "absent", slog.LevelWarn, "switches document absent in Nacos; keeping the last good one")
	default:
		f.report(ctx, "ok", slog.LevelInfo, "switches document read from Nacos")
		if sum := md5Hex([]byte(content)); sum != f.last {
			f.last = sum
			f.apply([]byte(content))
		}
	}
}

func (f *feed) report(ctx context.Context, state string, level slog.Level, msg string, attrs ...any) {
	if state != f.state {
		f.state = state
		f.src.cfg.Log.Log(ctx, level, msg, append([]any{"source", f.src.Describe()}, attrs...)...)
	}
}

func md5Hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}
