package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/tools/checker"
)

// A hostile case is one request a careless or malicious client might send. Every
// one must be answered 4xx with a clear message (the contract's Error body, or a
// GrabResult naming the refusal), never 5xx, and must change nothing.
type hostileCase struct {
	name    string
	service string // "grab" or "admin"
	method  string
	path    string
	token   string // "" sends no Authorization header
	auth    string // raw Authorization header, overrides token
	body    []byte
	header  map[string]string
	// want is the exact status expected (0: any 4xx).
	want int
	// plain: the answer comes from net/http itself before any handler (431), so
	// a plain-text body is all it can be.
	plain bool
}

// hostileResult is what the storm found.
type hostileResult struct {
	tried    int
	findings []string
}

func (h *hostileResult) find(format string, args ...any) {
	f := fmt.Sprintf(format, args...)
	for _, seen := range h.findings { // the storm sends every case several times
		if seen == f {
			return
		}
	}
	h.findings = append(h.findings, f)
}

// grabJSON builds a grab body by hand (so wrong types can be written).
func grabJSON(rid, pin, ip, items string) []byte {
	return []byte(fmt.Sprintf(`{"requestId":%s,"pin":%s,"ip":%s,"items":%s}`, rid, pin, ip, items))
}

func q(s string) string { b, _ := json.Marshal(s); return string(b) }

// grabBody is the exact body a load request was sent with: the checkout client's
// encoding of its grab.
func grabBody(r *checker.Request) []byte {
	b, _ := json.Marshal(grabRequest(r, false))
	return b
}

// send performs one hostile case and checks its answer.
func (h *hostileResult) send(client *http.Client, bases map[string]string, c hostileCase, mu *sync.Mutex) {
	req, err := http.NewRequest(c.method, bases[c.service]+c.path, bytes.NewReader(c.body))
	if err != nil {
		// A path net/http itself refuses to build is not a request a client can send.
		return
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	} else if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if len(c.body) > 0 {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	mu.Lock()
	defer mu.Unlock()
	h.tried++
	if err != nil {
		h.find("%s: no answer: %v", c.name, err)
		return
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	raw = bytes.TrimSpace(raw)
	var e struct {
		Code    string `json:"code"`
		Result  string `json:"result"`
		Message string `json:"message"`
	}
	jsonErr := json.Unmarshal(raw, &e)
	switch {
	case resp.StatusCode >= 500:
		h.find("%s: answered %d (a 5xx for bad input): %.200s", c.name, resp.StatusCode, raw)
	case c.want != 0 && resp.StatusCode != c.want:
		h.find("%s: answered %d, want %d: %.200s", c.name, resp.StatusCode, c.want, raw)
	case c.want == 0 && (resp.StatusCode < 400 || resp.StatusCode >= 500):
		h.find("%s: answered %d, want a 4xx: %.200s", c.name, resp.StatusCode, raw)
	case c.plain:
	case resp.StatusCode >= 400 && (jsonErr != nil || e.Message == "" || (e.Code == "" && e.Result == "")):
		h.find("%s: %d without a clear message (want the contract's Error body): %.200s", c.name, resp.StatusCode, raw)
	}
}

// slowClients opens n connections that send their headers one byte at a time, and
// reports those the server kept open longer than limit (a slowloris attack pins
// one goroutine and one socket per connection for as long as the server waits).
func slowClients(addr string, n int, limit time.Duration) (tried int, held []string) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			slowBody := i%2 == 1
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				mu.Lock()
				held = append(held, fmt.Sprintf("slow client %d: dial: %v", i, err))
				mu.Unlock()
				return
			}
			defer c.Close()
			start := time.Now()
			head := "POST /v1/grab HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer x\r\nX-Slow: "
			if slowBody {
				head = "POST /v1/grab HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"requestId\":"
			}
			_, _ = c.Write([]byte(head))
			closed := make(chan struct{})
			go func() {
				_, _ = io.Copy(io.Discard, bufio.NewReader(c))
				close(closed)
			}()
			t := time.NewTicker(300 * time.Millisecond)
			defer t.Stop()
			for {
				select {
				case <-closed:
					if took := time.Since(start); took > limit {
						mu.Lock()
						held = append(held, fmt.Sprintf("slow client %d (slow body %v): held open %s, limit %s", i, slowBody, took.Round(100*time.Millisecond), limit))
						mu.Unlock()
					}
					return
				case <-t.C:
					if time.Since(start) > 3*limit {
						mu.Lock()
						held = append(held, fmt.Sprintf("slow client %d (slow body %v): still open after %s", i, slowBody, time.Since(start).Round(time.Second)))
						mu.Unlock()
						return
					}
					_ = c.SetWriteDeadline(time.Now().Add(time.Second))
					_, _ = c.Write([]byte("a"))
				}
			}
		}(i)
	}
	wg.Wait()
	return n, held
}

// canaryState is everything the storm must leave as it was.
type canaryState struct {
	Hash, Pins, IPs, Ledger map[string]string
	Pending                 []string
}

func readCanary(ctx context.Context, c redis.UniversalClient, key string) (canaryState, error) {
	var s canaryState
	var err error
	if s.Hash, err = c.HGetAll(ctx, key).Result(); err != nil {
		return s, err
	}
	if s.Pins, err = c.HGetAll(ctx, promo.PinsKey(key)).Result(); err != nil {
		return s, err
	}
	if s.IPs, err = c.HGetAll(ctx, promo.IPsKey(key)).Result(); err != nil {
		return s, err
	}
	if s.Ledger, err = c.HGetAll(ctx, promo.LedgerKey(key)).Result(); err != nil {
		return s, err
	}
	s.Pending, err = c.ZRange(ctx, promo.PendingKey(key), 0, -1).Result()
	return s, err
}

// diffCanary names what changed.
func diffCanary(before, after canaryState) []string {
	var out []string
	for name, pair := range map[string][2]map[string]string{"hash": {before.Hash, after.Hash}, "pins": {before.Pins, after.Pins},
		"ips": {before.IPs, after.IPs}, "ledger": {before.Ledger, after.Ledger}} {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			for k, v := range pair[1] {
				if pair[0][k] != v {
					out = append(out, fmt.Sprintf("canary %s field %s: %q -> %q", name, k, pair[0][k], v))
				}
			}
			for k, v := range pair[0] {
				if _, ok := pair[1][k]; !ok {
					out = append(out, fmt.Sprintf("canary %s field %s: %q removed", name, k, v))
				}
			}
		}
	}
	if !reflect.DeepEqual(before.Pending, after.Pending) {
		out = append(out, fmt.Sprintf("canary pending set %v -> %v", before.Pending, after.Pending))
	}
	return out
}

// indexShard is the client of the shard that holds requestId's request index entry.
func indexShard(shards []redis.UniversalClient, rid string) redis.UniversalClient {
	return shards[ring.Default.Shard(promo.RequestIndexKey(rid))]
}

// rawCases are requests no well-behaved client library would send, written to the
// socket as they are: request smuggling shapes, broken framing. Each must get a 4xx
// (net/http answers these itself, in plain text) and change nothing.
func rawCases(host string, validBody string) map[string]string {
	cl := fmt.Sprint(len(validBody))
	return map[string]string{
		"raw: Content-Length and Transfer-Encoding both": "POST /v1/grab HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: " + cl +
			"\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"raw: two different Content-Lengths": "POST /v1/grab HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 5\r\nContent-Length: " + cl +
			"\r\n\r\n" + validBody,
		"raw: no Host header":           "POST /v1/grab HTTP/1.1\r\nContent-Length: " + cl + "\r\n\r\n" + validBody,
		"raw: a space in the method":    "PO ST /v1/grab HTTP/1.1\r\nHost: " + host + "\r\n\r\n",
		"raw: a header without a colon": "POST /v1/grab HTTP/1.1\r\nHost: " + host + "\r\nAuthorization Bearer x\r\n\r\n",
		"raw: request line of 64 KiB":   "GET /" + strings.Repeat("a", 64<<10) + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n",
		"raw: unknown protocol version": "POST /v1/grab HTTP/9.9\r\nHost: " + host + "\r\n\r\n",
		"raw: bad chunk size":           "POST /v1/grab HTTP/1.1\r\nHost: " + host + "\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + validBody + "\r\n0\r\n\r\n",
	}
}

// sendRaw writes one raw request and reads the status code of the answer.
func sendRaw(addr, raw string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(raw)); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
