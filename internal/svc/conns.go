package svc

import (
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultMaxConns is --max-conns where a service names no bound of its own.
const DefaultMaxConns = 1000

// ConnMetrics counts the connections of a process's listeners, by listener.
type ConnMetrics struct {
	open  *prometheus.GaugeVec
	waits *prometheus.CounterVec
}

// NewConnMetrics registers flashsale_http_connections_open and
// flashsale_http_connection_waits_total on reg.
func NewConnMetrics(reg prometheus.Registerer) *ConnMetrics {
	m := &ConnMetrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "flashsale_http_connections_open",
			Help: "HTTP connections open, by listener."}, []string{"listener"}),
		waits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "flashsale_http_connection_waits_total",
			Help: "Times a listener held at its --max-conns bound and left new connections waiting in the kernel's queue."}, []string{"listener"}),
	}
	reg.MustRegister(m.open, m.waits)
	return m
}

// ConnLimit is one listener's bound: at most max connections open (0: no bound).
type ConnLimit struct {
	max   int
	open  prometheus.Gauge
	waits prometheus.Counter
}

// Limit is the bound of the listener named listener ("api", "ops").
func (m *ConnMetrics) Limit(listener string, max int) *ConnLimit {
	return &ConnLimit{max: max, open: m.open.WithLabelValues(listener), waits: m.waits.WithLabelValues(listener)}
}

// wrap bounds ln. At the bound it stops accepting, as netutil.LimitListener does:
// newcomers wait in the kernel's queue rather than each costing a goroutine and
// a TLS handshake, and a connection that closes lets the next one in.
func (c *ConnLimit) wrap(ln net.Listener) net.Listener {
	if c == nil {
		return ln
	}
	l := &limitListener{Listener: ln, limit: c, done: make(chan struct{})}
	if c.max > 0 {
		l.slots = make(chan struct{}, c.max)
	}
	return l
}

type limitListener struct {
	net.Listener
	limit     *ConnLimit
	slots     chan struct{} // one token per open connection; nil: no bound
	done      chan struct{} // closed by Close, to free an Accept waiting for a slot
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	if !l.acquire() {
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		l.release()
		return nil, err
	}
	l.limit.open.Inc()
	return &limitConn{Conn: c, l: l}, nil
}

// acquire takes a slot, waiting for one at the bound; false once closed.
func (l *limitListener) acquire() bool {
	if l.slots == nil {
		return true
	}
	select {
	case l.slots <- struct{}{}:
		return true
	default:
	}
	l.limit.waits.Inc()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-l.done:
		return false
	}
}

func (l *limitListener) release() {
	if l.slots != nil {
		<-l.slots
	}
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

// limitConn gives its slot back when closed, once however often it is closed.
type limitConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.limit.open.Dec()
		c.l.release()
	})
	return err
}
