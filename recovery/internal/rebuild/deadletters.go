package rebuild

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/flashsale/platform/internal/store"
)

// refuseDeadLettered refuses to rebuild a promotion whose events may be in the
// dead-letter topic rather than the record: restored from a record that lacks
// them, the shard would sell what was granted, or withhold what was returned.
// A dead letter naming no promotion could be any shard's. IgnoreDeadLetters is
// on-call's override, once they have decided.
func (r *rebuildRun) refuseDeadLettered(ctx context.Context) error {
	dead, err := r.d.Record.DeadLettered(ctx)
	if err != nil || len(dead) == 0 {
		return err
	}
	live, err := r.d.Record.LivePromotions(ctx)
	if err != nil {
		return err
	}
	var named []string
	for s, ts := range pick(live, r.o.Promo, r.clients) {
		for _, t := range ts {
			if n := dead[t.p.ID()]; n > 0 {
				named = append(named, fmt.Sprintf("%s (shard %d): %d", t.p.ID(), s, n))
			}
		}
	}
	if n := dead[store.ID{}]; n > 0 {
		named = append(named, fmt.Sprintf("%d naming no promotion it could read", n))
	}
	if len(named) == 0 {
		return nil
	}
	sort.Strings(named)
	msg := "dead-lettered flow events not replayed: " + strings.Join(named, "; ")
	if r.o.IgnoreDeadLetters {
		r.sum.Warnings = append(r.sum.Warnings, "rebuilt past "+msg)
		return nil
	}
	return fmt.Errorf("%w: %s. Replay them (deploy/RUNBOOK.md, \"Alert: FlowSinkDeadLetters\") or rerun with --ignore-dead-letters", ErrRefused, msg)
}
