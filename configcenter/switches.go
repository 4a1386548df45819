// Package configcenter holds the on-call switches of a flash sale (docs/CONTRACT.md,
// "Config center"): the typed, validated snapshot the services read on the hot path,
// and the sources that feed it (a watched local file; Nacos in production).
package configcenter

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
)

// DataID and Group name the switches document in Nacos.
const (
	DataID = "flashsale-switches"
	Group  = "FLASHSALE"
)

// MethodLimits are per-instance requests per second; 0 means no limit.
type MethodLimits struct {
	Grab   float64 `json:"grab"`
	Cancel float64 `json:"cancel"`
}

// Switches is the switches document.
type Switches struct {
	GrabEnabled       bool    `json:"grabEnabled"`
	KafkaDegrade      bool    `json:"kafkaDegrade"`
	DegradeRateFactor float64 `json:"degradeRateFactor"`
	// DegradeMaxPerSecond caps, per instance, the grabs that go to MySQL while
	// kafkaDegrade is on, whatever their promotions' rate limits (none included).
	DegradeMaxPerSecond float64      `json:"degradeMaxPerSecond"`
	MethodLimits        MethodLimits `json:"methodLimits"`
	BlockedPromotions   []string     `json:"blockedPromotions"`
	// BlockedPins and BlockedIPs are buyers whose grabs are refused BLOCKED
	// without a Redis call: pins as sent, ips as addresses or CIDR ranges.
	BlockedPins []string `json:"blockedPins"`
	BlockedIPs  []string `json:"blockedIps"`
	// ShardAddrs points logical shards ("0".."15") at another Redis master than
	// their flags name: on-call's failover to a promoted replica (RUNBOOK.md).
	// A shard it does not name uses its flag's address.
	ShardAddrs map[string]string `json:"shardAddrs,omitempty"`
}

// DefaultDegradeMaxPerSecond is the degrade cap of a document that sets none: well
// under what one MySQL primary commits of the degrade path's transactions, so
// that a switch to MySQL in a peak does not take the system of record down.
const DefaultDegradeMaxPerSecond = 200

// MaxDegradeMaxPerSecond bounds degradeMaxPerSecond: a larger cap is a typo.
const MaxDegradeMaxPerSecond = 100_000

// Default is what a service runs with before any document arrives: selling, no degrade.
func Default() Switches {
	return Switches{GrabEnabled: true, DegradeRateFactor: 1, DegradeMaxPerSecond: DefaultDegradeMaxPerSecond}
}

// WithLists is s with every list present, empty rather than null, for clients.
func (s Switches) WithLists() Switches {
	for _, l := range []*[]string{&s.BlockedPromotions, &s.BlockedPins, &s.BlockedIPs} {
		if *l == nil {
			*l = []string{}
		}
	}
	return s
}

// Snapshot is one applied document, immutable once published.
type Snapshot struct {
	Switches
	// MD5 of the document as published, so on-call tools and /metrics can tell versions apart.
	MD5 string
	// AppliedAt is when this instance put the snapshot in force (zero for the defaults).
	AppliedAt time.Time
	// Doc is the document as published (nil for the defaults), for the switch
	// history; it is the caller's bytes, not a copy, and never changed.
	Doc     []byte
	blocked map[string]bool
	buyers  blockedBuyers
	// shardAddrs is ShardAddrs by shard number.
	shardAddrs map[int]string
}

// ShardAddrOverrides is the shard -> address overrides in force (nil for none).
func (s *Snapshot) ShardAddrOverrides() map[int]string { return s.shardAddrs }

// Blocked reports whether grabs for promotion key "<promoId>_<type>" are blocked.
func (s *Snapshot) Blocked(promoID string, typ int) bool {
	if len(s.blocked) == 0 {
		return false
	}
	return s.blocked[promo.Key(promoID, typ)[2:]]
}

// BlockedBuyer reports whether grabs by pin from ip are refused BLOCKED.
func (s *Snapshot) BlockedBuyer(pin, ip string) bool { return s.buyers.blocked(pin, ip) }

// RateFactorPermille is the promotion rate-limit multiplier in force, in thousandths.
func (s *Snapshot) RateFactorPermille() int64 {
	if !s.KafkaDegrade {
		return 1000
	}
	return int64(s.DegradeRateFactor * 1000)
}

// Parse validates a switches document strictly; a document with any error is
// rejected whole, so the caller keeps its last good snapshot.
func Parse(doc []byte) (*Snapshot, error) {
	// Start from the defaults so an absent field means "as usual", not "off".
	sw := Default()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sw); err != nil {
		return nil, fmt.Errorf("switches document: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("switches document: trailing data after the object")
	}
	if sw.DegradeRateFactor < 0 || sw.DegradeRateFactor > 1 {
		return nil, fmt.Errorf("switches document: degradeRateFactor %v outside 0..1", sw.DegradeRateFactor)
	}
	if sw.DegradeMaxPerSecond < 1 || sw.DegradeMaxPerSecond > MaxDegradeMaxPerSecond {
		return nil, fmt.Errorf("switches document: degradeMaxPerSecond %v outside 1..%d (grabs a second one instance sends to MySQL while degraded)",
			sw.DegradeMaxPerSecond, MaxDegradeMaxPerSecond)
	}
	if sw.MethodLimits.Grab < 0 || sw.MethodLimits.Cancel < 0 {
		return nil, fmt.Errorf("switches document: methodLimits must be >= 0")
	}
	blocked := make(map[string]bool, len(sw.BlockedPromotions))
	for _, b := range sw.BlockedPromotions {
		if !validBlocked(b) {
			return nil, fmt.Errorf("switches document: blockedPromotions entry %q is not <promoId>_<type>", b)
		}
		blocked[b] = true
	}
	buyers, err := parseBlockedBuyers(sw.BlockedPins, sw.BlockedIPs)
	if err != nil {
		return nil, err
	}
	shardAddrs, err := parseShardAddrs(sw.ShardAddrs)
	if err != nil {
		return nil, fmt.Errorf("switches document: shardAddrs: %w", err)
	}
	sum := md5.Sum(doc)
	return &Snapshot{Switches: sw, MD5: hex.EncodeToString(sum[:]), Doc: doc, blocked: blocked, buyers: buyers, shardAddrs: shardAddrs}, nil
}

// parseShardAddrs reads the shard address overrides ("<shard>": "host:port").
func parseShardAddrs(m map[string]string) (map[int]string, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[int]string, len(m))
	for k, addr := range m {
		shard, err := strconv.Atoi(k)
		if err != nil || shard < 0 || shard >= ring.Shards || strconv.Itoa(shard) != k {
			return nil, fmt.Errorf("shard %q: want a number in 0..%d", k, ring.Shards-1)
		}
		host, port, err := net.SplitHostPort(addr)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("shard %d: address %q is not host:port", shard, addr)
		}
		out[shard] = addr
	}
	return out, nil
}

func validBlocked(s string) bool {
	id, typ, ok := promo.SplitPromotionRef(s)
	return ok && promo.ValidPromoID(id) && promo.ValidType(typ)
}

// Holder publishes the snapshot in force; Load is lock-free for the hot path.
type Holder struct {
	p     atomic.Pointer[Snapshot]
	mu    sync.Mutex // orders Store's calls of the hooks
	hooks []func(*Snapshot)
	// allowed, when set, is the servers a shardAddrs override may name.
	allowed atomic.Pointer[func(addr string) bool]
}

// NewHolder starts with the defaults.
func NewHolder() *Holder {
	h := &Holder{}
	h.p.Store(&Snapshot{Switches: Default(), MD5: "default"})
	return h
}

// Load returns the snapshot in force.
func (h *Holder) Load() *Snapshot { return h.p.Load() }

// Store publishes s, then runs the hooks (OnStore) with it.
func (h *Holder) Store(s *Snapshot) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.p.Store(s)
	for _, f := range h.hooks {
		f(s)
	}
}

// OnStore runs f with every snapshot stored from now on, and at once with the one
// in force: for what the hot path does not read per call, such as where each
// shard's server is (shardAddrs).
func (h *Holder) OnStore(f func(*Snapshot)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hooks = append(h.hooks, f)
	f(h.p.Load())
}

// Info describes the snapshot in force for /readyz, so an operator can check
// that every instance runs the version configctl published.
func (h *Holder) Info() map[string]any {
	s := h.Load()
	sw := map[string]any{"md5": s.MD5, "grabEnabled": s.GrabEnabled, "kafkaDegrade": s.KafkaDegrade,
		"degradeRateFactor": s.DegradeRateFactor, "degradeMaxPerSecond": s.DegradeMaxPerSecond, "blockedPromotions": len(s.BlockedPromotions),
		"blockedPins": len(s.BlockedPins), "blockedIps": len(s.BlockedIPs)}
	if len(s.ShardAddrs) > 0 {
		sw["shardAddrs"] = s.ShardAddrs
	}
	if !s.AppliedAt.IsZero() {
		sw["appliedAt"] = s.AppliedAt.UTC().Format(time.RFC3339Nano)
	}
	return map[string]any{"switches": sw}
}

// AllowShardAddrs makes every document whose shardAddrs names a server allowed
// refuses (shardpool.Allowlist) refused whole by Follow, as a malformed one is.
func (h *Holder) AllowShardAddrs(allowed func(addr string) bool) { h.allowed.Store(&allowed) }

// admits reports why snap may not be applied: a shardAddrs server not allowed.
func (h *Holder) admits(snap *Snapshot) error {
	p := h.allowed.Load()
	if p == nil {
		return nil
	}
	for shard, addr := range snap.ShardAddrOverrides() {
		if !(*p)(addr) {
			return fmt.Errorf("shardAddrs.%d: %s is not among the servers allowed at deploy (--redis-allow)", shard, addr)
		}
	}
	return nil
}

// Mover is where shards' servers can be moved (shardpool.Pool).
type Mover interface {
	Move(overrides map[int]string) (moved []int, err error)
}

// FollowShards moves m's shards as every document h stores says (shardAddrs),
// from now on; onMoved, when set, learns which shards moved.
func (h *Holder) FollowShards(m Mover, log *slog.Logger, onMoved func(shards []int)) {
	h.OnStore(func(snap *Snapshot) {
		moved, err := m.Move(snap.ShardAddrOverrides())
		switch {
		case err != nil:
			log.Error("shard addresses of the switches not applied", "err", err.Error(), "md5", snap.MD5)
		case len(moved) > 0:
			log.Warn("shards moved to the servers the switches name", "shards", moved, "md5", snap.MD5)
			if onMoved != nil {
				onMoved(moved)
			}
		}
	})
}
