// Package shardmark reads and writes a shard's markers (promo.FenceKey,
// promo.BuiltKey), so grab-service's fence and the rebuild agree on what "whole"
// means. The built marker names the server it was written on (its run_id): one
// naming another server is a promoted replica that may lack the last acknowledged
// takes, so it is treated as lost until a rebuild (docs/design.md, "Scripts and
// keys"). A marker without a run_id is trusted as it always was.
package shardmark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// Built is the value of a built marker.
type Built struct {
	By         string `json:"by"`
	At         string `json:"at"`
	Promotions int    `json:"promotions"`
	// RunID is the run_id of the server the contents were built on.
	RunID string `json:"runId,omitempty"`
}

// State is what a shard's markers say.
type State int

const (
	// Whole: the built marker is there and names this server (or no server).
	Whole State = iota
	// Missing: no built marker; the server lost its data (or never had any).
	Missing
	// Moved: the built marker names another server: a promoted replica.
	Moved
)

// Status is one read of a shard's markers.
type Status struct {
	Rebuilding bool  // the fence marker is set
	Built      State // what the built marker says of this server
	// MarkerRunID and ServerRunID tell a Moved shard's story in logs.
	MarkerRunID, ServerRunID string
	// ServerTime is the server's clock just before the markers were read: a serving
	// report stamped with it proves what the instance saw after a given moment.
	ServerTime time.Time
}

// Read reads a shard's markers and its server's run_id in one round trip.
func Read(ctx context.Context, c redis.UniversalClient, shard int) (Status, error) {
	var clock *redis.TimeCmd
	var fence *redis.IntCmd
	var built *redis.StringCmd
	var info *redis.StringCmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		clock = p.Time(ctx) // first: the markers are read no earlier than this
		fence = p.Exists(ctx, promo.FenceKey(shard))
		built = p.Get(ctx, promo.BuiltKey(shard))
		info = p.Info(ctx, "server")
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Status{}, fmt.Errorf("read the markers of shard %d: %w", shard, err)
	}
	st := Status{Rebuilding: fence.Val() > 0, ServerRunID: runID(info.Val()), ServerTime: clock.Val()}
	raw, err := built.Result()
	switch {
	case errors.Is(err, redis.Nil):
		st.Built = Missing
		return st, nil
	case err != nil:
		return Status{}, fmt.Errorf("read the built marker of shard %d: %w", shard, err)
	}
	var b Built
	_ = json.Unmarshal([]byte(raw), &b) // a marker of another shape is a marker without a run_id
	st.MarkerRunID = b.RunID
	if b.RunID != "" && st.ServerRunID != "" && b.RunID != st.ServerRunID {
		st.Built = Moved
	}
	return st, nil
}

// MarkBuilt writes the shard's built marker, naming the server it is written on.
// With ifAbsent it writes only where no marker is (grab-service marking a shard
// the record holds nothing of); otherwise it replaces any (a rebuild that
// committed the whole shard).
func MarkBuilt(ctx context.Context, c redis.UniversalClient, shard int, by string, promotions int, ifAbsent bool) error {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return fmt.Errorf("mark shard %d built: read the server's run_id: %w", shard, err)
	}
	val, _ := json.Marshal(Built{By: by, At: time.Now().UTC().Format(time.RFC3339), Promotions: promotions, RunID: runID(info)})
	if ifAbsent {
		err = c.SetNX(ctx, promo.BuiltKey(shard), val, 0).Err()
	} else {
		err = c.Set(ctx, promo.BuiltKey(shard), val, 0).Err()
	}
	if err != nil {
		return fmt.Errorf("mark shard %d built: %w", shard, err)
	}
	return nil
}

// runID picks run_id out of INFO server ("" when absent).
func runID(info string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(line, "run_id:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
