package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/platform/internal/store"
)

// A change made through the API is recorded before it is published and resolved
// after; the history pages newest first, bounded, with a cursor.
func TestSwitchHistoryRecordsResolvesAndPages(t *testing.T) {
	t.Parallel()
	s := open(t)
	h := store.NewSwitchHistory(s.DB())
	ctx, now := context.Background(), time.Now()
	var ids []int64
	for i, md5 := range []string{"a1", "b2", "c3"} {
		id, err := h.Record(ctx, store.SwitchChange{At: now, Actor: store.Actor{Name: "alice", Role: "oncall"}, Via: store.SwitchViaAPI,
			Outcome: store.SwitchUnconfirmed, Reason: "drill", Store: "file:x", BeforeMD5: "", AfterMD5: md5,
			AfterDoc: []byte(`{}`), Changes: json.RawMessage(`[{"switch":"kafkaDegrade","before":"false","after":"true"}]`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		if i < 2 {
			if err := h.Resolve(ctx, id, store.SwitchApplied); err != nil {
				t.Fatal(err)
			}
		}
	}
	must(t, h.Resolve(ctx, ids[0], store.SwitchFailed)) // resolved already: stays APPLIED
	page, err := h.Page(ctx, "", 2)
	if err != nil || len(page.Entries) != 2 || page.Entries[0].ID != ids[2] || page.Entries[0].Outcome != store.SwitchUnconfirmed ||
		page.Entries[1].Outcome != store.SwitchApplied || page.NextCursor == "" || page.Entries[0].Actor.Name != "alice" {
		t.Fatalf("first page: %+v %v", page, err)
	}
	next, err := h.Page(ctx, page.NextCursor, 2)
	if err != nil || len(next.Entries) != 1 || next.Entries[0].ID != ids[0] || next.Entries[0].Outcome != store.SwitchApplied || next.NextCursor != "" {
		t.Fatalf("second page: %+v %v", next, err)
	}
	if _, err := h.Page(ctx, "x1", 2); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("a bad cursor: %v", err)
	}
	if _, err := h.Page(ctx, "", store.MaxSwitchHistory+1); err == nil {
		t.Error("a page above the bound was read")
	}
}

// A version seen in force that no row names is recorded once as DETECTED, however
// many instances see it at once; a version an UNCONFIRMED row names is APPLIED.
func TestSwitchHistoryObserveRecordsOutsideChangesOnce(t *testing.T) {
	t.Parallel()
	s := open(t)
	h := store.NewSwitchHistory(s.DB())
	ctx, now := context.Background(), time.Now()
	seen := func(md5, doc string, since int64) store.Sighting {
		return store.Sighting{At: now, Store: "file:x", MD5: md5, Doc: []byte(doc), Since: since,
			Changes: func(before []byte) (json.RawMessage, error) {
				b, _ := json.Marshal([]map[string]string{{"switch": "(before)", "before": string(before), "after": doc}})
				return b, nil
			}}
	}
	// First sighting of a process, on an empty history: the document in force is recorded.
	first, detected, err := h.Observe(ctx, seen("m1", `{"a":1}`, -1))
	if err != nil || !detected {
		t.Fatalf("first sighting: %d %v %v", first, detected, err)
	}
	// Three instances see an outside change at once: one row.
	var wg sync.WaitGroup
	found := make(chan bool, 3)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, d, err := h.Observe(ctx, seen("m2", `{"a":2}`, first))
			if err != nil {
				t.Error(err)
			}
			found <- d
		}()
	}
	wg.Wait()
	close(found)
	n := 0
	for d := range found {
		if d {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the outside change was recorded %d times", n)
	}
	// A change through the API, recorded UNCONFIRMED, then seen in force.
	id, err := h.Record(ctx, store.SwitchChange{At: now, Via: store.SwitchViaAPI, Outcome: store.SwitchUnconfirmed, Store: "file:x",
		BeforeMD5: "m2", AfterMD5: "m3", AfterDoc: []byte(`{"a":3}`)})
	must(t, err)
	got, d, err := h.Observe(ctx, seen("m3", `{"a":3}`, first))
	if err != nil || d || got != id {
		t.Errorf("the API's change seen: %d %v %v, want %d", got, d, err, id)
	}
	// A restarted instance finds the newest row naming what is in force.
	if got, d, err := h.Observe(ctx, seen("m3", `{"a":3}`, -1)); err != nil || d || got != id {
		t.Errorf("after a restart: %d %v %v", got, d, err)
	}
	page, err := h.Page(ctx, "", 10)
	if err != nil || len(page.Entries) != 3 {
		t.Fatalf("history: %+v %v", page, err)
	}
	api, outside := page.Entries[0], page.Entries[1]
	if api.Outcome != store.SwitchApplied || outside.Via != store.SwitchViaDetected || outside.BeforeMD5 != "m1" ||
		outside.Actor.Name != "" || string(outside.Changes) != `[{"after":"{\"a\":2}","before":"{\"a\":1}","switch":"(before)"}]` {
		t.Errorf("history: api %+v, outside %+v %s", api, outside, outside.Changes)
	}
}
