package rebuild

import (
	"fmt"
	"io"
	"time"

	"github.com/flashsale/platform/internal/shardmark"
)

// ShardSummary is what one shard's rebuild restored.
type ShardSummary struct {
	Shard      int
	Whole      bool // the whole shard (and its built marker), not one promotion
	Promotions int
	Pins, IPs  int
	Ledger     int
	NoBodyHash int
	Index      int // request index entries restored (whole shards only)
	Holds      int // open holds restored (whole shards only)
	// ServedBy counts the grab-service instances that serve the shard again.
	ServedBy int
	Keys     []string
	warnings []string
}

func (s *ShardSummary) add(r Restored) {
	s.Promotions++
	s.Pins += r.Pins
	s.IPs += r.IPs
	s.Ledger += r.Ledger
	s.NoBodyHash += r.NoBodyHash
	s.Keys = append(s.Keys, r.Key)
	s.warnings = append(s.warnings, r.Warnings...)
}

// Summary is a run's report.
type Summary struct {
	Shards  []ShardSummary
	CatchUp string
	// OwedSettled counts owed CANCELs written into the flow log before the read
	// (store.SettleOwedCancels): debts a lost shard may have taken along.
	OwedSettled int
	Warnings    []string
	Elapsed     time.Duration
}

// Print writes the report: one line per shard, the totals, then every warning.
func (s Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "rebuild: flow sink catch-up: %s\n", s.CatchUp)
	if s.OwedSettled > 0 {
		fmt.Fprintf(w, "rebuild: %d owed CANCELs written into the flow log first (their GRAB had arrived)\n", s.OwedSettled)
	}
	fmt.Fprintf(w, "%5s  %10s  %8s  %8s  %13s  %13s  %9s\n", "shard", "promotions", "pins", "ips", "ledger", "request index", "served by")
	var t ShardSummary
	for _, sh := range s.Shards {
		fmt.Fprintf(w, "%5d  %10d  %8d  %8d  %13d  %13d  %9d\n", sh.Shard, sh.Promotions, sh.Pins, sh.IPs, sh.Ledger, sh.Index, sh.ServedBy)
		t.Promotions += sh.Promotions
		t.Pins += sh.Pins
		t.IPs += sh.IPs
		t.Ledger += sh.Ledger
		t.NoBodyHash += sh.NoBodyHash
		t.Index += sh.Index
		t.Holds += sh.Holds
	}
	fmt.Fprintf(w, "%5s  %10d  %8d  %8d  %13d  %13d\n", "total", t.Promotions, t.Pins, t.IPs, t.Ledger, t.Index)
	if t.Holds > 0 {
		fmt.Fprintf(w, "rebuild: %d open holds restored at their deadlines (grants neither confirmed nor returned)\n", t.Holds)
	}
	if t.NoBodyHash > 0 {
		fmt.Fprintf(w, "note: %d ledger entries restored without a body hash (flow rows older than migration 0002): a replay of them answers REQUEST_ID_REUSED\n", t.NoBodyHash)
	}
	for _, sh := range s.Shards {
		if sh.ServedBy == 0 {
			fmt.Fprintf(w, "note: no grab-service instance reported on shard %d in the last %s: none serves it until one starts\n", sh.Shard, shardmark.ReportStale)
		}
	}
	for _, warn := range s.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warn)
	}
	fmt.Fprintf(w, "rebuild: %d shard(s), %d promotions restored in %s; rate windows and pending sets start empty\n",
		len(s.Shards), t.Promotions, s.Elapsed.Round(time.Millisecond))
}
