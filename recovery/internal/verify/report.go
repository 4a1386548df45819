package verify

import (
	"fmt"
	"io"
	"sort"

	"github.com/flashsale/platform/internal/promo"
)

// Print writes every drift (sorted), every promotion in flight and one summary
// line; verbose adds a line per promotion checked, for before/after comparisons.
func (r Report) Print(w io.Writer, verbose bool) {
	ps := append([]Checked(nil), r.Promotions...)
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Shard != ps[j].Shard {
			return ps[i].Shard < ps[j].Shard
		}
		return ps[i].Key < ps[j].Key
	})
	drifted, inFlight := map[string]bool{}, 0
	for _, p := range ps {
		if verbose && len(p.Drifts) == 0 && p.Open == 0 {
			fmt.Fprintf(w, "OK     %s  shard %d  remaining %d of %d  pins %d  ips %d\n", p.Key, p.Shard, p.Remaining, p.Total, p.Pins, p.IPs)
		}
		if p.Open > 0 {
			inFlight++
			fmt.Fprintf(w, "IN-FLIGHT  %s  shard %d  %d takes open; counters not compared\n", p.Key, p.Shard, p.Open)
		}
		ds := append([]Drift(nil), p.Drifts...)
		sort.Slice(ds, func(i, j int) bool {
			if ds[i].What != ds[j].What {
				return ds[i].What < ds[j].What
			}
			return ds[i].Who < ds[j].Who
		})
		for _, d := range ds {
			fmt.Fprintln(w, d.String())
		}
		if len(ds) > 0 {
			drifted[promo.BucketBase(p.Key)] = true
		}
	}
	for _, d := range append(r.IndexDrifts, r.DeadLetters...) {
		fmt.Fprintln(w, d.String())
	}
	scope := "all shards"
	if len(r.Shards) > 0 {
		scope = fmt.Sprintf("shards %v", r.Shards)
	}
	// A bucketed promotion is checked hash by hash; the count names promotions.
	promotions := map[string]bool{}
	for _, p := range ps {
		promotions[promo.BucketBase(p.Key)] = true
	}
	hashes := ""
	if len(promotions) != len(ps) {
		hashes = fmt.Sprintf(" (%d bucket hashes)", len(ps))
	}
	index := ""
	if r.IndexChecked {
		index = fmt.Sprintf(", request index drifts on %d shards", len(r.IndexDrifts))
	}
	fmt.Fprintf(w, "verify: %d promotions%s on %s checked against MySQL: %d drifts in %d promotions, %d in flight%s; flow sink catch-up %s\n",
		len(promotions), hashes, scope, len(r.Drifts())-len(r.IndexDrifts)-len(r.DeadLetters), len(drifted), inFlight, index, r.CatchUp)
}
