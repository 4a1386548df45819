package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flashsale/platform/internal/stack"
)

// The channel section against grab-service and promo-admin as the contract says
// they answer: scripted servers stand in for them here, since the local stack runs
// only in `make test`'s own step (TestDemoRunsShort runs the section for real
// there). It creates the promotion on the app only and sends the two grabs, each
// with its channel, and fails when an answer is not the one the contract gives.
func TestShowChannelsSendsEachGrabOnItsChannel(t *testing.T) {
	t.Parallel()
	var created map[string]any
	admin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&created)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"promoId":"x","type":1,"total":10,"perPinLimit":1,"perIpLimit":0,"maxPerGrab":1,"channels":["APP"],`+
			`"startAt":"2026-01-01T00:00:00Z","endAt":"2026-01-01T01:00:00Z","key":"C_x_1","shard":0,"state":"ACTIVE","remaining":10,"granted":0,`+
			`"createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"}`)
	}))
	defer admin.Close()
	var channels []string
	grab := func(sellOnWeb bool) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				RequestID string `json:"requestId"`
				Channel   string `json:"channel"`
			}
			_ = json.NewDecoder(r.Body).Decode(&body)
			channels = append(channels, body.Channel)
			w.Header().Set("Content-Type", "application/json")
			if body.Channel == "APP" || sellOnWeb {
				_, _ = io.WriteString(w, `{"requestId":"`+body.RequestID+`","result":"GRANTED","items":[{"promoId":"x","type":1,"num":1,"remaining":9}]}`)
				return
			}
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"requestId":"`+body.RequestID+`","result":"CHANNEL_NOT_ALLOWED","failedItem":0}`)
		}))
	}
	g := grab(false)
	defer g.Close()
	pf, err := newPlatform(stack.File{Grab: g.URL, Admin: admin.URL}, http.DefaultClient, "c", "a")
	if err != nil {
		t.Fatal(err)
	}
	if err := showChannels(context.Background(), pf, "t1"); err != nil {
		t.Fatalf("showChannels: %v", err)
	}
	if ch, _ := created["channels"].([]any); len(ch) != 1 || ch[0] != "APP" {
		t.Errorf("created with channels %v, want [APP]", created["channels"])
	}
	if strings.Join(channels, ",") != "WEB,APP" {
		t.Errorf("grabs sent on %v, want WEB then APP", channels)
	}
	// A platform that sells on WEB anyway fails the demo.
	g2 := grab(true)
	defer g2.Close()
	pf2, _ := newPlatform(stack.File{Grab: g2.URL, Admin: admin.URL}, http.DefaultClient, "c", "a")
	if err := showChannels(context.Background(), pf2, "t2"); err == nil || !strings.Contains(err.Error(), "CHANNEL_NOT_ALLOWED") {
		t.Errorf("a grant on WEB: err %v, want the demo to fail", err)
	}
}
