// Package nacostest is a Nacos 2.x config server for tests: enough of the gRPC
// protocol (and the HTTP login), on the SDK's own types, for the real
// nacos-sdk-go/v2 client, since no Nacos server is packaged for this machine. It
// can delay its listen replies (the SDK's lost-push defect) and restart in place.
package nacostest

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/nacos-group/nacos-sdk-go/v2/api/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// RPCPortOffset is where Nacos 2.x clients look for gRPC: main port + 1000.
const RPCPortOffset = 1000

// Key names one config.
type Key struct{ Tenant, Group, DataID string }

// Version is one write of a config, kept in order for tests to inspect.
type Version struct {
	Key
	Op      string // "publish" or "remove"
	Content string
	MD5     string
	At      time.Time
}

type item struct {
	content, md5 string
	modified     time.Time
}

// Server is the test server. The zero value is not usable; call New or Start.
type Server struct {
	mu      sync.Mutex
	configs map[Key]item
	history []Version
	conns   map[string]*conn        // by peer address: the SDK's unary calls and bi-stream share one HTTP/2 connection
	listens map[string]map[Key]bool // what each connection listens to
	users   map[string]string       // username -> password; empty means no auth
	tokens  map[string]bool         // access tokens handed out by login
	running bool
	quit    chan struct{}
	wg      sync.WaitGroup // handlers and pushes in flight; grpc.Server.Stop does not wait for them

	listenDelay     atomic.Int64 // nanoseconds added to every batch-listen reply
	upToDateListens atomic.Int64 // batch-listens waiting for their reply that found nothing changed
	queries         atomic.Int64
	logins          atomic.Int64
	pushSeq         atomic.Int64

	port int         // main (HTTP) port; gRPC is port+RPCPortOffset
	tls  *tls.Config // nil: plaintext; else both ports speak TLS only
	grpc *grpc.Server
	http *http.Server
}

type conn struct {
	sendMu sync.Mutex // grpc-go forbids concurrent Send on one stream
	stream pb.BiRequestStream_RequestBiStreamServer
}

// New makes a stopped server with no configs.
func New() *Server {
	return &Server{configs: map[Key]item{}, conns: map[string]*conn{}, listens: map[string]map[Key]bool{},
		users: map[string]string{}, tokens: map[string]bool{}}
}

// Start runs a new server for the test and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := New()
	if err := s.Start(); err != nil {
		t.Fatalf("nacos test server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartTLS is Start with both ports speaking TLS only, with cfg's certificate, as
// a production Nacos does: HTTPS on the main port (the login), TLS on gRPC.
func StartTLS(t testing.TB, cfg *tls.Config) *Server {
	t.Helper()
	s := New()
	s.tls = cfg
	if err := s.Start(); err != nil {
		t.Fatalf("nacos test server: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Logins counts successful logins.
func (s *Server) Logins() int64 { return s.logins.Load() }

// Addr is host:port of the main port, as a client is configured with it.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// AddUser turns authentication on: clients must log in over HTTP and present
// the token on every config request.
func (s *Server) AddUser(name, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[name] = password
}

// SetListenDelay delays every batch-listen reply by d. The reply is computed when
// the request arrives and sent after d, as a slow network would deliver it.
func (s *Server) SetListenDelay(d time.Duration) { s.listenDelay.Store(int64(d)) }

// UpToDateListens counts batch-listens waiting for their (delayed) reply whose
// client held every key's current content: a change made now is pushed to that
// client while its listen is in flight, and missing from the listen's answer.
func (s *Server) UpToDateListens() int64 { return s.upToDateListens.Load() }

// Queries counts ConfigQuery requests served.
func (s *Server) Queries() int64 { return s.queries.Load() }

// Connections counts clients with an open bi-stream.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Start listens on 127.0.0.1: the first time on a free pair of ports (main and
// main+1000), afterwards on the same ports again.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return errors.New("nacos test server: already running")
	}
	httpL, rpcL, err := s.listen()
	if err != nil {
		return err
	}
	s.quit = make(chan struct{})
	var opts []grpc.ServerOption
	if s.tls != nil {
		httpL = tls.NewListener(httpL, s.tls.Clone())
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.tls))) // adds ALPN h2, which grpc-go clients require
	}
	s.grpc = grpc.NewServer(opts...)
	h := &handler{s: s}
	pb.RegisterRequestServer(s.grpc, h)
	pb.RegisterBiRequestStreamServer(s.grpc, h)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /nacos/v1/auth/users/login", s.login)
	mux.HandleFunc("POST /nacos/v1/auth/login", s.login)
	// Handshakes refused on purpose are the tests' business, not the log's.
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	s.running = true
	gs, hs := s.grpc, s.http
	go func() { _ = gs.Serve(rpcL) }()
	go func() { _ = hs.Serve(httpL) }()
	return nil
}

func (s *Server) listen() (httpL, rpcL net.Listener, err error) {
	if s.port != 0 {
		if httpL, err = net.Listen("tcp", s.Addr()); err != nil {
			return nil, nil, fmt.Errorf("nacos test server: listen again on %s: %w", s.Addr(), err)
		}
		if rpcL, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(s.port+RPCPortOffset)); err != nil {
			httpL.Close()
			return nil, nil, fmt.Errorf("nacos test server: listen again on gRPC port: %w", err)
		}
		return httpL, rpcL, nil
	}
	// Find a free port whose +1000 partner is free too.
	for range 50 {
		if httpL, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, nil, fmt.Errorf("nacos test server: listen: %w", err)
		}
		port := httpL.Addr().(*net.TCPAddr).Port
		if port+RPCPortOffset <= 65535 {
			if rpcL, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+RPCPortOffset)); err == nil {
				s.port = port
				return httpL, rpcL, nil
			}
		}
		httpL.Close()
	}
	return nil, nil, errors.New("nacos test server: no free pair of ports (main, main+1000)")
}

// Stop closes every connection and waits for its handlers and pushes to end.
// Configs are kept for the next Start.
func (s *Server) Stop() {
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		return
	}
	s.running = false
	close(s.quit)
	gs, hs := s.grpc, s.http
	s.mu.Unlock()
	gs.Stop()
	_ = hs.Close()
	s.wg.Wait()
	s.mu.Lock()
	s.conns = map[string]*conn{}
	s.listens = map[string]map[Key]bool{}
	s.tokens = map[string]bool{}
	s.mu.Unlock()
}

// Restart stops the server and starts it again on the same ports.
func (s *Server) Restart() error {
	s.Stop()
	return s.Start()
}

// enter registers a handler or push and returns the channel closed when the
// server stops; false once it is stopping.
func (s *Server) enter() (quit <-chan struct{}, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil, false
	}
	s.wg.Add(1)
	return s.quit, true
}

// Get returns a config as the server holds it.
func (s *Server) Get(k Key) (content, md5sum string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.configs[k]
	return it.content, it.md5, ok
}

// Set writes a config as the console would, and pushes the change to listeners.
func (s *Server) Set(k Key, content string) {
	_ = s.publish(k, content, "")
}

// Remove deletes a config and pushes the change to listeners.
func (s *Server) Remove(k Key) {
	s.mu.Lock()
	_, had := s.configs[k]
	delete(s.configs, k)
	if had {
		s.history = append(s.history, Version{Key: k, Op: "remove", At: time.Now()})
	}
	s.mu.Unlock()
	if had {
		s.notify(k)
	}
}

// History returns every write of k, oldest first.
func (s *Server) History(k Key) []Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Version
	for _, v := range s.history {
		if v.Key == k {
			out = append(out, v)
		}
	}
	return out
}

// errCAS carries the message a real Nacos server answers a failed compare-and-set with.
//
//lint:ignore ST1005 the real server's words, which clients match
var errCAS = errors.New("Cas publish fail, server md5 may have changed.")

// publish writes content; with casMD5 set, only over that exact version.
func (s *Server) publish(k Key, content, casMD5 string) error {
	sum := md5.Sum([]byte(content))
	v := Version{Key: k, Op: "publish", Content: content, MD5: hex.EncodeToString(sum[:]), At: time.Now()}
	s.mu.Lock()
	cur, ok := s.configs[k]
	if casMD5 != "" && (!ok || cur.md5 != casMD5) {
		s.mu.Unlock()
		return errCAS
	}
	s.configs[k] = item{content: content, md5: v.MD5, modified: v.At}
	s.history = append(s.history, v)
	s.mu.Unlock()
	s.notify(k)
	return nil
}

// notify pushes ConfigChangeNotifyRequest to every connection listening to k,
// asynchronously, as a Nacos server does after it has answered the publish.
func (s *Server) notify(k Key) {
	s.mu.Lock()
	var targets []*conn
	for peer, keys := range s.listens {
		if c, ok := s.conns[peer]; ok && keys[k] {
			targets = append(targets, c)
		}
	}
	s.mu.Unlock()
	for _, c := range targets {
		if _, ok := s.enter(); !ok {
			return
		}
		go func() {
			defer s.wg.Done()
			_ = c.send(pushPayload(k, strconv.FormatInt(s.pushSeq.Add(1), 10)))
		}()
	}
}

func (c *conn) send(p *pb.Payload) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.stream.Send(p)
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	user, pass := r.Form.Get("username"), r.Form.Get("password")
	s.mu.Lock()
	want, ok := s.users[user]
	if !ok || want != pass {
		s.mu.Unlock()
		http.Error(w, "unknown user", http.StatusForbidden)
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	s.tokens[token] = true
	s.mu.Unlock()
	s.logins.Add(1)
	w.Header().Set("Content-Type", "application/json")
	// tokenTtl must be a JSON number: the SDK asserts float64 and panics otherwise.
	fmt.Fprintf(w, `{"accessToken":%q,"tokenTtl":18000,"globalAdmin":false}`, token)
}

// authorized reports whether a config request may proceed.
func (s *Server) authorized(headers map[string]string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.users) == 0 || s.tokens[headers["accessToken"]]
}

// registered reports whether peer has set up its bi-stream.
func (s *Server) registered(peer string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.conns[peer]
	return ok
}

// sleep waits d unless the server stops or the call ends first.
func sleep(ctx context.Context, quit <-chan struct{}, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-quit:
	case <-ctx.Done():
	}
}
