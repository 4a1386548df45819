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
		var line []byte
		if line, err = k.r.ReadSlice('\n'); err != nil {
			return 0, false, len(line) > 0, err
		}
		got = true
		if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) {
			return 0, false, true, errors.New("malformed status line")
		}
		if status, err = strconv.Atoi(string(line[9:12])); err != nil {
			return 0, false, true, err
		}
		keep = line[7] == '1'
		length, chunked := -1, false
		for {
			if line, err = k.r.ReadSlice('\n'); err != nil {
				return 0, false, true, err
			}
			h := bytes.TrimRight(line, "\r\n")
			if len(h) == 0 {
				break
			}
			name, value, ok := bytes.Cut(h, []byte(":"))
			if !ok {
				continue
			}
			value = bytes.TrimSpace(value)
			switch {
			case bytes.EqualFold(name, []byte("Content-Length")):
				if length, err = strconv.Atoi(string(value)); err != nil || length < 0 {
					return 0, false, true, errors.New("malformed Content-Length")
				}
			case bytes.EqualFold(name, []byte("Transfer-Encoding")):
				chunked = bytes.Contains(bytes.ToLower(value), []byte("chunked"))
			case bytes.EqualFold(name, []byte("Connection")):
				if bytes.EqualFold(value, []byte("close")) {
					keep = false
				} else if bytes.EqualFold(value, []byte("keep-alive")) {
					keep = true
				}
			}
		}
		if status >= 100 && status < 200 { // an interim answer: the real one follows
			continue
		}
		k.body = k.body[:0]
		switch {
		case status == 204 || status == 304:
		case chunked:
			err = k.readChunked()
		case length >= 0:
			k.body = grow(k.body, length)
			_, err = io.ReadFull(k.r, k.body)
		default: // the body runs to the end of the connection
			keep = false
			var b bytes.Buffer
			_, err = b.ReadFrom(k.r)
			k.body = append(k.body, b.Bytes()...)
		}
		return status, keep, true, err
	}
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
	i, n := 0, len(raw)
	skipSpace := func() {
		for i < n && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
			i++
		}
	}
	// str reads a string at raw[i] (a quote) and returns its contents; esc when it holds a backslash.
	str := func() (s []byte, esc, good bool) {
		start := i + 1
		for j := start; j < n; j++ {
			switch raw[j] {
			case '\\':
				esc = true
				j++
			case '"':
				i = j + 1
				return raw[start:j], esc, true
			}
		}
		return nil, false, false
	}
	skipSpace()
	if i >= n || raw[i] != '{' {
		return "", "", false
	}
	i++
	for {
		skipSpace()
		if i < n && raw[i] == '}' {
			return result, code, true
		}
		if i >= n || raw[i] != '"' {
			return "", "", false
		}
		key, esc, good := str()
		if !good || esc {
			return "", "", false
		}
		skipSpace()
		if i >= n || raw[i] != ':' {
			return "", "", false
		}
		i++
		skipSpace()
		if i >= n {
			return "", "", false
		}
		if raw[i] == '"' {
			v, esc, good := str()
			if !good {
				return "", "", false
			}
			if k := string(key); k == "result" || k == "code" {
				if esc {
					return "", "", false
				}
				if k == "result" {
					result = intern(v)
				} else {
					code = intern(v)
				}
			}
		} else {
			// Skip a number, literal, object or array: to the comma or brace closing this member.
			depth := 0
		skip:
			for ; i < n; i++ {
				switch raw[i] {
				case '"':
					if _, _, good := str(); !good {
						return "", "", false
					}
					i--
				case '{', '[':
					depth++
				case '}', ']':
					if depth == 0 {
						break skip
					}
					depth--
				case ',':
					if depth == 0 {
						break skip
					}
				}
			}
		}
		skipSpace()
		if i >= n {
			return "", "", false
		}
		switch raw[i] {
		case ',':
			i++
		case '}':
			return result, code, true
		default:
			return "", "", false
		}
	}
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
