package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/platform/internal/httpx"
)

// proxy puts several grab-service instances behind one address, as a load balancer
// would: round robin, and failing over to the next instance when one refuses the
// connection. A request that reached an instance and got no answer is never sent
// again by the proxy (it might have been served): it answers 502 and the client
// retries with the same requestId, which is what makes retries cross instances.
type proxy struct {
	mu       sync.Mutex
	backends []string
	next     atomic.Uint64
	down     sync.Map // backend -> time.Time it is skipped until
	client   *http.Client
	srv      *http.Server
	ln       net.Listener

	failovers atomic.Int64 // requests moved to another instance after a refused connection
	failed    atomic.Int64 // requests answered 502: sent, no answer
	logf      func(format string, args ...any)
}

func newProxy(backends ...string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 256
	t.ResponseHeaderTimeout = 15 * time.Second
	t.DialContext = (&net.Dialer{Timeout: time.Second}).DialContext
	p := &proxy{backends: backends, client: &http.Client{Transport: t}, ln: ln}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func (p *proxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) setBackends(backends ...string) {
	p.mu.Lock()
	p.backends = append([]string(nil), backends...)
	p.mu.Unlock()
}

func (p *proxy) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	p.client.CloseIdleConnections()
}

func (p *proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpx.MaxBody+1))
	if err != nil {
		httpx.WriteError(r.Context(), &httpx.Error{Status: http.StatusRequestEntityTooLarge, Code: "PAYLOAD_TOO_LARGE", Message: "proxy: body too large"}, w)
		return
	}
	p.mu.Lock()
	backends := p.backends
	p.mu.Unlock()
	start := int(p.next.Add(1))
	var lastErr error
	for i := 0; i < len(backends); i++ {
		b := backends[(start+i)%len(backends)]
		if until, ok := p.down.Load(b); ok && time.Now().Before(until.(time.Time)) && i < len(backends)-1 {
			continue
		}
		resp, err := p.forward(r, b, body)
		if err == nil {
			p.down.Delete(b)
			relay(w, resp)
			return
		}
		lastErr = err
		if !refused(err) {
			// Sent and unanswered: it may have been served, so not sent again here.
			p.failed.Add(1)
			if p.logf != nil {
				p.logf("proxy: %s %s to %s: no answer: %v", r.Method, r.URL.Path, b, err)
			}
			httpx.WriteError(r.Context(), &httpx.Error{Status: http.StatusBadGateway, Code: "BAD_GATEWAY", Message: "proxy: the instance did not answer: " + err.Error()}, w)
			return
		}
		p.down.Store(b, time.Now().Add(300*time.Millisecond))
		if i < len(backends)-1 {
			p.failovers.Add(1)
		}
	}
	msg := "proxy: no instance"
	if lastErr != nil {
		msg += ": " + lastErr.Error()
	}
	httpx.WriteError(r.Context(), &httpx.Error{Status: http.StatusBadGateway, Code: "BAD_GATEWAY", Message: msg}, w)
}

func (p *proxy) forward(r *http.Request, backend string, body []byte) (*http.Response, error) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, backend+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out.Header = r.Header.Clone()
	// Grabs and cancels are idempotent by requestId: marked so, the transport resends
	// one whose reused keep-alive connection the instance closed before reading it
	// (as a shutting-down instance does), instead of failing it.
	out.Header.Set("Idempotency-Key", "requestId")
	return p.client.Do(out)
}

func relay(w http.ResponseWriter, resp *http.Response) {
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// refused reports whether the request never reached the backend: the connection
// could not be made, so sending it elsewhere cannot serve it twice.
func refused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
