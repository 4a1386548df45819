package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"strconv"
	"time"
)

// conn is one worker's keep-alive HTTP/1.1 connection, written and read by the
// worker's own goroutine. net/http hands every request from the caller's goroutine
// to the connection's write and read loops and back, and allocates a request, a
// response and their header maps each time; on a machine whose cores the load
// generator shares with what it measures, that cost (and the scheduler's spinning
// between the hand-offs, which grows as the rate falls) is taken from the system
// under test. Here a request is bytes appended to a buffer the worker reuses, and
// the answer is read into another.
type conn struct {
	host    string // host:port
	timeout time.Duration
	c       net.Conn
	io      io.ReadWriter // c's reads and writes (rawio_linux.go)
	r       *bufio.Reader
	stop    func() bool // ends the context.AfterFunc that closes c when the run's context ends
	req     []byte
	body    []byte
	reused  bool
}

func newConn(host string, timeout time.Duration) *conn {
	return &conn{host: host, timeout: timeout, req: make([]byte, 0, 512), body: make([]byte, 0, 512)}
}

func (k *conn) close() {
	if k.c != nil {
		k.stop()
		_ = k.c.Close()
		k.c, k.io, k.reused = nil, nil, false
	}
}

func (k *conn) dial(ctx context.Context) error {
	d := net.Dialer{Timeout: k.timeout}
	c, err := d.DialContext(ctx, "tcp", k.host)
	if err != nil {
		return err
	}
	k.c, k.io = c, socketIO(c)
	if k.r == nil {
		k.r = bufio.NewReaderSize(k.io, 4096)
	} else {
		k.r.Reset(k.io)
	}
	k.stop = context.AfterFunc(ctx, func() { _ = c.Close() })
	return nil
}

// do sends c and reads its answer. The answer's Body is the connection's buffer,
// valid until the next call.
func (k *conn) do(ctx context.Context, c Call) Answer {
	body, err := encodeBody(c.Body)
	if err != nil {
		return Answer{Result: "CLIENT_ERROR"}
	}
	k.req = appendRequest(k.req[:0], k.host, c, body)
	start := time.Now()
	for try := 0; ; try++ {
		if err := ctx.Err(); err != nil {
			return Answer{Result: "TRANSPORT_ERROR", Latency: time.Since(start)}
		}
		if k.c == nil {
			if err := k.dial(ctx); err != nil {
				return Answer{Result: "TRANSPORT_ERROR", Latency: time.Since(start)}
			}
		}
		reused := k.reused
		status, keep, got, err := k.roundTrip()
		if err != nil {
			k.close()
			// A kept-alive connection the server closed while idle fails before any
			// byte of the answer: sent again on a new one, as net/http does.
			if reused && !got && try == 0 {
				continue
			}
			return Answer{Result: "TRANSPORT_ERROR", Latency: time.Since(start)}
		}
		a := Answer{Status: status, Latency: time.Since(start), Body: k.body}
		a.Result = resultOf(k.body)
		if keep {
			k.reused = true
		} else {
			k.close()
		}
		return a
	}
}

// roundTrip writes k.req and reads one answer into k.body: its status, whether the
// connection stays open, and whether any byte of it came.
func (k *conn) roundTrip() (status int, keep, got bool, err error) {
	_ = k.c.SetDeadline(time.Now().Add(k.timeout))
	if _, err = k.io.Write(k.req); err != nil {
		return 0, false, false, err
	}
	for {
		var h head
		if h, got, err = k.readHead(); err != nil {
			return 0, false, got, err
		}
		if h.status >= 100 && h.status < 200 { // an interim answer: the real one follows
			continue
		}
		keep, err = k.readBody(h)
		return h.status, keep, true, err
	}
}

// head is an answer's status line and the headers its body is read by.
type head struct {
	status        int
	keep, chunked bool
	length        int // -1: no Content-Length
}

// readHead reads an answer's status line and headers; got is whether any byte came.
func (k *conn) readHead() (h head, got bool, err error) {
	line, err := k.r.ReadSlice('\n')
	if err != nil {
		return h, len(line) > 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
		return h, true, errors.New("malformed status line")
	}
	if h.status, err = strconv.Atoi(string(line[9:12])); err != nil {
		return h, true, err
	}
	h.keep, h.length = line[7] == '1', -1
	for {
		if line, err = k.r.ReadSlice('\n'); err != nil {
			return h, true, err
		}
		field := bytes.TrimRight(line, "\r\n")
		if len(field) == 0 {
			return h, true, nil
		}
		if err = h.header(field); err != nil {
			return h, true, err
		}
	}
}

// header reads one header field into h.
func (h *head) header(field []byte) error {
	name, value, ok := bytes.Cut(field, []byte(":"))
	if !ok {
		return nil
	}
	value = bytes.TrimSpace(value)
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		var err error
		if h.length, err = strconv.Atoi(string(value)); err != nil || h.length < 0 {
			return errors.New("malformed Content-Length")
		}
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		h.chunked = bytes.Contains(bytes.ToLower(value), []byte("chunked"))
	case bytes.EqualFold(name, []byte("Connection")):
		if bytes.EqualFold(value, []byte("close")) {
			h.keep = false
		} else if bytes.EqualFold(value, []byte("keep-alive")) {
			h.keep = true
		}
	}
	return nil
}

// readBody reads the body of an answer with head h into k.body, and reports
// whether the connection stays open.
func (k *conn) readBody(h head) (keep bool, err error) {
	k.body = k.body[:0]
	switch {
	case h.status == 204 || h.status == 304:
	case h.chunked:
		err = k.readChunked()
	case h.length >= 0:
		k.body = grow(k.body, h.length)
		_, err = io.ReadFull(k.r, k.body)
	default: // the body runs to the end of the connection
		h.keep = false
		var b bytes.Buffer
		_, err = b.ReadFrom(k.r)
		k.body = append(k.body, b.Bytes()...)
	}
	return h.keep, err
}

func (k *conn) readChunked() error {
	for {
		line, err := k.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(bytes.TrimRight(line, "\r\n"), []byte(";"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 32)
		if err != nil || n < 0 {
			return errors.New("malformed chunk size")
		}
		if n == 0 {
			for { // trailers, up to the blank line
				if line, err = k.r.ReadSlice('\n'); err != nil {
					return err
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					return nil
				}
			}
		}
		at := len(k.body)
		k.body = grow(k.body, at+int(n))
		if _, err := io.ReadFull(k.r, k.body[at:]); err != nil {
			return err
		}
		if _, err := k.r.Discard(2); err != nil { // the chunk's CRLF
			return err
		}
	}
}

// grow returns b resized to n bytes, its contents kept.
func grow(b []byte, n int) []byte {
	if cap(b) < n {
		nb := make([]byte, n, max(n, 2*cap(b)))
		copy(nb, b)
		return nb
	}
	return b[:n]
}

// appendRequest appends c as an HTTP/1.1 request to host.
func appendRequest(b []byte, host string, c Call, body []byte) []byte {
	b = append(b, c.Method...)
	b = append(b, ' ')
	if c.Path == "" {
		b = append(b, '/')
	}
	b = append(b, c.Path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nUser-Agent: flashsale-loadgen\r\n"...)
	if c.Token != "" {
		b = append(b, "Authorization: Bearer "...)
		b = append(b, c.Token...)
		b = append(b, "\r\n"...)
	}
	if c.Attempt > 0 {
		b = append(b, "X-Grab-Attempt: "...)
		b = strconv.AppendInt(b, int64(c.Attempt), 10)
		b = append(b, "\r\n"...)
	}
	if c.Body != nil {
		b = append(b, "Content-Type: application/json\r\n"...)
	}
	if c.Body != nil || c.Method == "POST" || c.Method == "PUT" || c.Method == "PATCH" {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}

// encodeBody is a call's body as JSON: bytes already encoded ([]byte,
// json.RawMessage, string) as they are, anything else through encoding/json.
func encodeBody(v any) ([]byte, error) {
	switch b := v.(type) {
	case nil:
		return nil, nil
	case []byte:
		return b, nil
	case json.RawMessage:
		return b, nil
	case string:
		return []byte(b), nil
	}
	return json.Marshal(v)
}

// resultOf is an answer's top-level "result" string, else its "code", else "".
// The answer is scanned once, without reflection; a body that is not a JSON
// object, or whose field holds an escape, goes through encoding/json instead.
func resultOf(raw []byte) string {
	result, code, ok := topLevelFields(raw)
	if !ok {
		var r struct {
			Result string `json:"result"`
			Code   string `json:"code"`
		}
		_ = json.Unmarshal(raw, &r)
		result, code = r.Result, r.Code
	}
	if result != "" {
		return result
	}
	return code
}

// topLevelFields finds the string values of the "result" and "code" members of the
// JSON object raw, skipping nested values; ok is false when it cannot tell.
func topLevelFields(raw []byte) (result, code string, ok bool) {
	s := scanner{raw: raw}
	s.skipSpace()
	if !s.at('{') {
		return "", "", false
	}
	s.i++
	for {
		s.skipSpace()
		if s.at('}') {
			return result, code, true
		}
		key, value, isString, good := s.member()
		if !good {
			return "", "", false
		}
		if isString {
			switch string(key) {
			case "result":
				result = intern(value)
			case "code":
				code = intern(value)
			}
		}
		s.skipSpace()
		switch {
		case s.at(','):
			s.i++
		case s.at('}'):
			return result, code, true
		default:
			return "", "", false
		}
	}
}

// scanner reads a JSON object's top level in place: raw[i] is the next byte.
type scanner struct {
	raw []byte
	i   int
}

func (s *scanner) at(b byte) bool { return s.i < len(s.raw) && s.raw[s.i] == b }

func (s *scanner) skipSpace() {
	for s.i < len(s.raw) && (s.raw[s.i] == ' ' || s.raw[s.i] == '\t' || s.raw[s.i] == '\n' || s.raw[s.i] == '\r') {
		s.i++
	}
}

// str reads a string at raw[i] (a quote) and returns its contents; esc when it holds a backslash.
func (s *scanner) str() (v []byte, esc, good bool) {
	start := s.i + 1
	for j := start; j < len(s.raw); j++ {
		switch s.raw[j] {
		case '\\':
			esc = true
			j++
		case '"':
			s.i = j + 1
			return s.raw[start:j], esc, true
		}
	}
	return nil, false, false
}

// member reads one member at raw[i]: its key, and its value when that is a string
// (isString); good is false when the object cannot be told, a key or a named
// field's string value holding an escape included.
func (s *scanner) member() (key, value []byte, isString, good bool) {
	if !s.at('"') {
		return nil, nil, false, false
	}
	key, esc, good := s.str()
	if !good || esc {
		return nil, nil, false, false
	}
	s.skipSpace()
	if !s.at(':') {
		return nil, nil, false, false
	}
	s.i++
	s.skipSpace()
	if s.i >= len(s.raw) {
		return nil, nil, false, false
	}
	if !s.at('"') {
		return key, nil, false, s.skipValue()
	}
	value, esc, good = s.str()
	if !good {
		return nil, nil, false, false
	}
	if k := string(key); esc && (k == "result" || k == "code") {
		return nil, nil, false, false
	}
	return key, value, true, true
}

// skipValue skips a number, literal, object or array: to the comma or brace
// closing this member.
func (s *scanner) skipValue() bool {
	depth := 0
	for ; s.i < len(s.raw); s.i++ {
		switch s.raw[s.i] {
		case '"':
			if _, _, good := s.str(); !good {
				return false
			}
			s.i--
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return true
			}
			depth--
		case ',':
			if depth == 0 {
				return true
			}
		}
	}
	return true
}

// known are the results answers repeat, so that naming one allocates nothing.
var known = func() map[string]string {
	m := map[string]string{}
	for _, r := range []string{"GRANTED", "SOLD_OUT", "DUPLICATE", "REPLAY", "LIMIT_EXCEEDED", "RATE_LIMITED",
		"NOT_STARTED", "ENDED", "NOT_FOUND", "UNAUTHORIZED", "BAD_REQUEST", "OVERLOADED", "UNAVAILABLE", "CANCELLED", "ERROR"} {
		m[r] = r
	}
	return m
}()

func intern(b []byte) string {
	if s, ok := known[string(b)]; ok {
		return s
	}
	return string(b)
}
