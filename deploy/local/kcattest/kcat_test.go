// Package kcattest reads the platform's topics with kcat (librdkafka, Debian's package)
// from the local stack's broker, so promo-grab-flow and promo-state are known to serve
// consumers outside Go, and checks each event of a promotion it sells through the
// running stack against docs/CONTRACT.md ("Flow events", "Promotion state events";
// api/ has no schema for events, so the documented fields and types are checked here).
// It needs the stack up: it runs when FLASHSALE_STACK_TEST=1.
package kcattest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/stack"
)

// message is one line of `kcat -J`.
type message struct {
	Key     *string `json:"key"`
	Payload string  `json:"payload"`
}

func TestTopicsReadByKcat(t *testing.T) {
	if os.Getenv("FLASHSALE_STACK_TEST") != "1" {
		t.Skip("needs the local stack and kcat; set FLASHSALE_STACK_TEST=1 (make test does)")
	}
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat not installed (deploy/local/deps.sh --test installs it)")
	}
	st, err := stack.Load("")
	if err != nil {
		t.Fatalf("load the stack file (is the stack up?): %v", err)
	}
	id := fmt.Sprintf("kcat-%d", time.Now().UnixNano())
	sell(t, st, id)

	key := "C_" + id + "_1"
	flow := awaitEvents(t, st.Kafka[0], "promo-grab-flow", id, 2)
	for _, m := range flow {
		checkFlowEvent(t, m, id)
	}
	if kinds := fieldValues(flow, "kind"); strings.Join(kinds, ",") != "GRAB,CANCEL" {
		t.Errorf("flow events of %s: kinds %v, want GRAB then CANCEL", id, kinds)
	}
	state := awaitEvents(t, st.Kafka[0], "promo-state", key, 2)
	for _, m := range state {
		checkStateEvent(t, m, id, key)
	}
	if states := fieldValues(state, "state"); strings.Join(states, ",") != "SOLD_OUT,RESTOCKED" {
		t.Errorf("state events of %s: %v, want SOLD_OUT then RESTOCKED", key, states)
	}
}

// A promotion in buckets announces per promotion: its buckets' own BUCKET_EMPTY
// changes stay inside (docs/CONTRACT.md, "Buckets"), so a consumer sees one SOLD_OUT
// under the promotion's key and nothing under a bucket's.
func TestBucketedPromotionAnnouncesOnce(t *testing.T) {
	if os.Getenv("FLASHSALE_STACK_TEST") != "1" {
		t.Skip("needs the local stack and kcat; set FLASHSALE_STACK_TEST=1 (make test does)")
	}
	st, err := stack.Load("")
	if err != nil {
		t.Fatalf("load the stack file (is the stack up?): %v", err)
	}
	id := fmt.Sprintf("kcatb-%d", time.Now().UnixNano())
	now := time.Now().UTC()
	call(t, st.Admin+"/v1/promotions", "dev-admin-token", http.StatusCreated, map[string]any{
		"promoId": id, "type": 1, "title": "kcat " + id, "total": 2, "buckets": 2, "perPinLimit": 1, "maxPerGrab": 1,
		"startAt": now.Add(-time.Second).Format(time.RFC3339), "endAt": now.Add(time.Hour).Format(time.RFC3339)})
	for i := range 2 {
		if r := call(t, st.Grab+"/v1/grab", "dev-checkout-token", http.StatusOK, map[string]any{
			"requestId": fmt.Sprintf("%s-r%d", id, i), "pin": fmt.Sprintf("kcat-buyer-%d", i), "ip": "10.9.9.9",
			"items": []map[string]any{{"promoId": id, "type": 1, "num": 1}}}); r["result"] != "GRANTED" {
			t.Fatalf("grab %d: %v", i, r)
		}
	}
	key := "C_" + id + "_1"
	awaitEvents(t, st.Kafka[0], "promo-state", key, 1)
	time.Sleep(2 * time.Second) // a bucket's change published late would come now
	state := awaitEvents(t, st.Kafka[0], "promo-state", key, 1)
	for _, m := range state {
		checkStateEvent(t, m, id, key)
	}
	if states := fieldValues(state, "state"); strings.Join(states, ",") != "SOLD_OUT" {
		t.Errorf("state events of %s: %v, want one SOLD_OUT", key, states)
	}
}

// sell creates a promotion of one unit, grabs it and cancels the grab: a GRAB and a
// CANCEL on promo-grab-flow, a SOLD_OUT and a RESTOCKED on promo-state.
func sell(t *testing.T, st stack.File, id string) {
	now := time.Now().UTC()
	call(t, st.Admin+"/v1/promotions", "dev-admin-token", http.StatusCreated, map[string]any{
		"promoId": id, "type": 1, "title": "kcat " + id, "total": 1, "perPinLimit": 1, "maxPerGrab": 1,
		"startAt": now.Add(-time.Second).Format(time.RFC3339), "endAt": now.Add(time.Hour).Format(time.RFC3339)})
	if r := call(t, st.Grab+"/v1/grab", "dev-checkout-token", http.StatusOK, map[string]any{
		"requestId": id + "-r1", "pin": "kcat-buyer", "ip": "10.9.9.9",
		"items": []map[string]any{{"promoId": id, "type": 1, "num": 1}}}); r["result"] != "GRANTED" {
		t.Fatalf("grab: %v", r)
	}
	if r := call(t, st.Grab+"/v1/grab/"+id+"-r1/cancel", "dev-checkout-token", http.StatusOK,
		map[string]any{"pin": "kcat-buyer", "reason": "PAYMENT_EXPIRED"}); r["result"] != "RETURNED" {
		t.Fatalf("cancel: %v", r)
	}
}

func call(t *testing.T, url, token string, want int, body any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != want {
		t.Fatalf("POST %s: %d %v, want %d", url, resp.StatusCode, out, want)
	}
	return out
}

// awaitEvents reads topic whole with kcat until at least n messages mention needle.
func awaitEvents(t *testing.T, broker, topic, needle string, n int) []message {
	t.Helper()
	var got []message
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		got = got[:0]
		for _, m := range kcat(t, broker, topic) {
			if strings.Contains(m.Payload, needle) {
				got = append(got, m)
			}
		}
		if len(got) >= n {
			return got
		}
	}
	t.Fatalf("kcat read %d events of %s on %s, want %d", len(got), needle, topic, n)
	return nil
}

func kcat(t *testing.T, broker, topic string) []message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kcat", "-C", "-b", broker, "-t", topic, "-o", "beginning", "-e", "-J", "-q").Output()
	if err != nil {
		t.Fatalf("kcat -C -t %s: %v", topic, err)
	}
	var ms []message
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		var m message
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("kcat -J line %q: %v", line, err)
		}
		ms = append(ms, m)
	}
	return ms
}

func fieldValues(ms []message, field string) []string {
	var vs []string
	for _, m := range ms {
		var v map[string]any
		_ = json.Unmarshal([]byte(m.Payload), &v)
		s, _ := v[field].(string)
		vs = append(vs, s)
	}
	return vs
}
