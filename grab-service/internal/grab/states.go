package grab

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/flashsale/platform/lua"
)

// announceStates is the reconciler's part in the promotion state events
// (internal/promostate): ENDED for every promotion the record says has ended,
// announced once by ended.lua whichever instance or q.lua gets there first, and
// every change a crash or a Kafka outage left in a shard's outbox. It reports
// how many changes it published.
func (s *Reconciler) announceStates(ctx context.Context, now time.Time) (int, error) {
	if s.States == nil {
		return 0, nil
	}
	var errs []error
	published := 0
	if s.EndedPromotionKeys != nil {
		keys, err := s.EndedPromotionKeys(ctx)
		errs = append(errs, err)
		for _, key := range s.ended.fresh(keys) {
			shard := s.ring.Shard(key)
			changes, settled, err := lua.Ended(ctx, s.Shards[shard], key, s.cfg.StateOutboxKey, now.UnixMilli())
			if err == nil {
				err = s.States.Announce(ctx, s.Shards[shard], changes)
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if settled { // else the record's clock is ahead of ours: ask again next pass
				s.ended.done(key)
			}
			published += len(changes)
		}
	}
	for _, c := range s.Shards {
		n, err := s.States.Sweep(ctx, c, now)
		published += n
		errs = append(errs, err)
	}
	return published, errors.Join(errs...)
}

// endedAnnounced remembers the ended promotions whose ENDED this instance has
// seen through, so each is asked once; it keeps only keys the record still lists.
type endedAnnounced struct {
	mu   sync.Mutex
	seen map[string]bool
}

// fresh returns the keys not yet seen through, and forgets the seen keys no
// longer listed.
func (e *endedAnnounced) fresh(listed []string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	kept := make(map[string]bool, len(e.seen))
	var out []string
	for _, k := range listed {
		if e.seen[k] {
			kept[k] = true
		} else {
			out = append(out, k)
		}
	}
	e.seen = kept
	return out
}

func (e *endedAnnounced) done(key string) {
	e.mu.Lock()
	e.seen[key] = true
	e.mu.Unlock()
}
