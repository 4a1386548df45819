package rebuild

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/shardmark"
)

// The shard markers (promo.FenceKey, promo.BuiltKey; what each means is there).

// fences raises and lowers the fence markers of the shards being rebuilt and keeps
// their TTL fresh while the rebuild runs.
type fences struct {
	shards  map[int]redis.UniversalClient
	ttl     time.Duration
	mu      sync.Mutex
	raised  map[int]bool
	stopped chan struct{}
	done    sync.WaitGroup
}

func newFences(shards map[int]redis.UniversalClient, ttl time.Duration) *fences {
	return &fences{shards: shards, ttl: ttl, raised: map[int]bool{}, stopped: make(chan struct{})}
}

// raise sets every fence, or none: a shard whose server does not answer cannot be
// rebuilt now, so the fences already set are lowered again and the error returned.
func (f *fences) raise(ctx context.Context) error {
	host, _ := os.Hostname()
	val, _ := json.Marshal(map[string]any{"by": "bin/recovery rebuild", "host": host, "pid": os.Getpid(), "since": time.Now().UTC().Format(time.RFC3339)})
	for shard, c := range f.shards {
		if err := c.Set(ctx, promo.FenceKey(shard), val, f.ttl).Err(); err != nil {
			f.lowerAll(context.WithoutCancel(ctx))
			return fmt.Errorf("fence shard %d: %w", shard, err)
		}
		f.mu.Lock()
		f.raised[shard] = true
		f.mu.Unlock()
	}
	f.done.Add(1)
	go f.refresh()
	return nil
}

// refresh keeps the raised fences alive until stop.
func (f *fences) refresh() {
	defer f.done.Done()
	t := time.NewTicker(f.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-f.stopped:
			return
		case <-t.C:
		}
		f.mu.Lock()
		for shard := range f.raised {
			ctx, cancel := context.WithTimeout(context.Background(), f.ttl/3)
			_ = f.shards[shard].Expire(ctx, promo.FenceKey(shard), f.ttl).Err()
			cancel()
		}
		f.mu.Unlock()
	}
}

// lower lifts one shard's fence: its rebuild committed (or it was given up).
func (f *fences) lower(ctx context.Context, shard int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.raised[shard] {
		return nil
	}
	if err := f.shards[shard].Del(ctx, promo.FenceKey(shard)).Err(); err != nil {
		return fmt.Errorf("lift the fence of shard %d: %w", shard, err)
	}
	delete(f.raised, shard)
	return nil
}

// lowerAll lifts every fence still raised and stops the refresher. A fence that
// cannot be lifted (server gone) expires with its TTL.
func (f *fences) lowerAll(ctx context.Context) {
	f.mu.Lock()
	shards := make([]int, 0, len(f.raised))
	for s := range f.raised {
		shards = append(shards, s)
	}
	f.mu.Unlock()
	for _, s := range shards {
		_ = f.lower(ctx, s)
	}
}

// stop ends the refresher; call once, after lowerAll.
func (f *fences) stop() {
	close(f.stopped)
	f.done.Wait()
}

// markBuilt records that the shard's contents are whole, on this server.
func markBuilt(ctx context.Context, c redis.UniversalClient, shard, promotions int) error {
	return shardmark.MarkBuilt(ctx, c, shard, "bin/recovery rebuild", promotions, false)
}

// Unbuilt lists, of the given shards, those whose server answers but is not whole:
// no built marker (lost and not rebuilt since), or the marker of another server (a
// replica promoted in a failover) (rebuild --missing).
func Unbuilt(ctx context.Context, shards []redis.UniversalClient) ([]int, error) {
	var out []int
	for shard, c := range shards {
		st, err := shardmark.Read(ctx, c, shard)
		if err != nil {
			return nil, err
		}
		if st.Built != shardmark.Whole {
			out = append(out, shard)
		}
	}
	return out, nil
}
