// Package heal rebuilds, with no one woken, a shard whose server is not whole: a
// replica the sentinels promoted (its built marker names another server) or a
// server that came back empty. It is `recovery rebuild --missing` run by the flow
// sink's process whenever it is needed, one instance at a time (a MySQL lock), and
// on-call is paged only when a heal fails or takes too long (HealStuck).
package heal

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/shardmark"
	"github.com/flashsale/platform/internal/svc"
)

// LockName is the MySQL named lock one healer holds while it heals.
const LockName = "flashsale.heal"

// Healer watches every shard's markers and rebuilds those not whole.
type Healer struct {
	Shards  []redis.UniversalClient // index = logical shard (the pool's clients, which follow the sentinels)
	DB      *sql.DB                 // for the lock
	Rebuild func(ctx context.Context, shards []int) error
	Log     *slog.Logger
	m       metrics
	since   map[int]time.Time // when each shard was first seen not whole
}

type metrics struct {
	heals    *prometheus.CounterVec
	unhealed prometheus.Gauge
	last     prometheus.Gauge
}

// New builds a healer; its metrics go to reg.
func New(shards []redis.UniversalClient, db *sql.DB, rebuild func(context.Context, []int) error, reg prometheus.Registerer, log *slog.Logger) *Healer {
	h := &Healer{Shards: shards, DB: db, Rebuild: rebuild, Log: log, since: map[int]time.Time{}, m: metrics{
		heals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "flashsale", Subsystem: "heal", Name: "runs_total",
			Help: "Heals of shards not whole, by result (healed, failed)."}, []string{"result"}),
		unhealed: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "flashsale", Subsystem: "heal", Name: "unhealed_seconds",
			Help: "How long the shard longest not whole (and answering) has waited for its heal; 0 when every shard is whole."}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "flashsale", Subsystem: "heal", Name: "last_heal_seconds",
			Help: "How long the last successful heal took, from the first sight of the shard not whole."}),
	}}
	for _, result := range []string{"healed", "failed"} {
		h.m.heals.WithLabelValues(result) // at 0 from the start, so the first failure is an increase
	}
	reg.MustRegister(h.m.heals, h.m.unhealed, h.m.last)
	return h
}

// Run heals at once and then every interval until ctx ends.
func (h *Healer) Run(ctx context.Context, every time.Duration) error {
	return svc.Every(ctx, every, h.Pass)
}

// Pass finds the shards not whole and, holding the lock, rebuilds them.
func (h *Healer) Pass(ctx context.Context) {
	broken := h.notWhole(ctx)
	if len(broken) == 0 {
		h.m.unhealed.Set(0)
		return
	}
	release, ok := h.lock(ctx)
	if !ok {
		return // another instance heals; it reports
	}
	defer release()
	h.Log.Warn("healing shards not whole", "shards", broken)
	if err := h.Rebuild(ctx, broken); err != nil {
		h.m.heals.WithLabelValues("failed").Inc()
		h.Log.Error("heal failed; retried next pass", "shards", broken, "err", err.Error())
		return
	}
	h.m.heals.WithLabelValues("healed").Inc()
	first := time.Now()
	for _, s := range broken {
		if at := h.since[s]; at.Before(first) {
			first = at
		}
		delete(h.since, s)
	}
	h.m.last.Set(time.Since(first).Seconds())
	h.Log.Info("shards healed", "shards", broken, "seconds", time.Since(first).Seconds())
}

// notWhole lists the shards whose server answers but is not whole; a server not
// answering (a master the sentinels have yet to replace) has nothing to heal yet.
func (h *Healer) notWhole(ctx context.Context) []int {
	var out []int
	now := time.Now()
	oldest := now
	for shard, c := range h.Shards {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := shardmark.Read(rctx, c, shard)
		cancel()
		if err != nil || st.Built == shardmark.Whole {
			if err == nil {
				delete(h.since, shard)
			}
			continue
		}
		if _, ok := h.since[shard]; !ok {
			h.since[shard] = now
		}
		if h.since[shard].Before(oldest) {
			oldest = h.since[shard]
		}
		out = append(out, shard)
	}
	h.m.unhealed.Set(now.Sub(oldest).Seconds())
	return out
}

// lock takes the healers' lock without waiting.
func (h *Healer) lock(ctx context.Context) (release func(), ok bool) {
	release, ok, err := Acquire(ctx, h.DB, 0)
	if err != nil {
		h.Log.Warn("heal lock not taken", "err", err.Error())
	}
	return release, ok
}

// Acquire takes the MySQL named lock every rebuild holds (the healer's, and
// `recovery rebuild`'s, so the two never rebuild at once), waiting up to wait, on
// a connection of its own: the lock is the connection's, and goes with it if the
// process dies.
func Acquire(ctx context.Context, db *sql.DB, wait time.Duration) (release func(), ok bool, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, false, err
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", LockName, int(wait.Seconds())).Scan(&got); err != nil || got.Int64 != 1 {
		conn.Close()
		return nil, false, err
	}
	return func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", LockName)
		conn.Close()
	}, true, nil
}
