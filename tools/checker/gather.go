package checker

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/flashsale/platform/internal/bucket"
	"github.com/flashsale/platform/internal/flow"
	"github.com/flashsale/platform/internal/promo"
	"github.com/flashsale/platform/internal/ring"
	"github.com/flashsale/platform/internal/store"
	"github.com/flashsale/platform/lua"
)

// SinkGroup is the flow sink's consumer group (recovery's flowlag.DefaultGroup).
const SinkGroup = "flashsale-flow-sink"

// Sources are where the checker reads the stack.
type Sources struct {
	Shards  []redis.UniversalClient // index = logical shard
	DB      *sqlx.DB
	Brokers []string // empty: the topic is not read
}

func (s Sources) shard(key string) redis.UniversalClient { return s.Shards[ring.Default.Shard(key)] }

// hashes is each bucket's hash key with the client of its shard.
func (p Promotion) hashes(s Sources) (keys []string, clients []redis.UniversalClient) {
	keys = bucket.Keys(ring.Default, p.Key(), promo.BucketsOf(p.Buckets))
	for _, k := range keys {
		clients = append(clients, s.shard(k))
	}
	return keys, clients
}

// Settle waits, up to timeout, until no take of the promotions is open (the
// reconciler has settled every crash leftover and published every owed CANCEL) and
// the flow sink has stored everything the broker holds. It returns what still kept
// it from settling, or nil.
func (s Sources) Settle(ctx context.Context, promos []Promotion, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		last = s.settled(ctx, promos)
		if last == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return last
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (s Sources) settled(ctx context.Context, promos []Promotion) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var open int64
	for _, p := range promos {
		keys, clients := p.hashes(s)
		for i, key := range keys {
			n, err := clients[i].ZCard(cctx, promo.PendingKey(key)).Result()
			if err != nil {
				return fmt.Errorf("pending set of %s: %w", key, err)
			}
			open += n
		}
	}
	if open > 0 {
		return fmt.Errorf("%d takes still open", open)
	}
	if len(s.Brokers) == 0 {
		return nil
	}
	lag, err := SinkLag(cctx, s.Brokers)
	if err != nil {
		return err
	}
	if lag > 0 {
		return fmt.Errorf("the flow sink is %d events behind", lag)
	}
	return nil
}

// SinkLag is how many events the broker holds that the flow sink has not committed.
func SinkLag(ctx context.Context, brokers []string) (int64, error) {
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 5 * time.Second}
	parts, err := partitions(ctx, c)
	if err != nil {
		return 0, err
	}
	var reqs []kafka.OffsetRequest
	for _, p := range parts {
		reqs = append(reqs, kafka.FirstOffsetOf(p), kafka.LastOffsetOf(p))
	}
	offs, err := c.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{flow.Topic: reqs}})
	if err != nil {
		return 0, fmt.Errorf("kafka offsets: %w", err)
	}
	first, last := map[int]int64{}, map[int]int64{}
	for _, po := range offs.Topics[flow.Topic] {
		if po.Error != nil {
			return 0, fmt.Errorf("kafka offsets of partition %d: %w", po.Partition, po.Error)
		}
		first[po.Partition], last[po.Partition] = po.FirstOffset, po.LastOffset
	}
	fetched, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: SinkGroup, Topics: map[string][]int{flow.Topic: parts}})
	if err != nil {
		return 0, fmt.Errorf("kafka committed offsets of %s: %w", SinkGroup, err)
	}
	if fetched.Error != nil {
		return 0, fmt.Errorf("kafka committed offsets of %s: %w", SinkGroup, fetched.Error)
	}
	committed := map[int]int64{}
	for _, fp := range fetched.Topics[flow.Topic] {
		if fp.Error != nil {
			return 0, fmt.Errorf("kafka committed offset of partition %d: %w", fp.Partition, fp.Error)
		}
		committed[fp.Partition] = fp.CommittedOffset
	}
	var lag int64
	for _, p := range parts {
		from, ok := committed[p]
		if !ok || from < first[p] {
			from = first[p]
		}
		lag += max(last[p]-from, 0)
	}
	return lag, nil
}

func partitions(ctx context.Context, c *kafka.Client) ([]int, error) {
	meta, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{flow.Topic}})
	if err != nil {
		return nil, fmt.Errorf("kafka metadata: %w", err)
	}
	if len(meta.Topics) != 1 || meta.Topics[0].Error != nil {
		return nil, fmt.Errorf("kafka metadata: topic %s not found", flow.Topic)
	}
	var ids []int
	for _, p := range meta.Topics[0].Partitions {
		ids = append(ids, p.ID)
	}
	return ids, nil
}

// Read takes the snapshot of the promotions: Redis, the record and the topic.
func (s Sources) Read(ctx context.Context, promos []Promotion) (Snapshot, error) {
	snap := Snapshot{Redis: map[string]PromoState{}, Record: map[string][]Row{}, Splits: map[string]Split{}}
	for _, p := range promos {
		keys, clients := p.hashes(s)
		var st PromoState
		for i, key := range keys {
			b, err := readRedis(ctx, clients[i], key)
			if err != nil {
				return snap, err
			}
			st = merge(st, b, i == 0)
		}
		snap.Redis[p.Key()] = st
	}
	if err := s.readRecord(ctx, promos, snap.Record); err != nil {
		return snap, err
	}
	if err := s.readSplits(ctx, promos, snap.Splits); err != nil {
		return snap, err
	}
	if len(s.Brokers) > 0 {
		wanted := map[string]bool{}
		for _, p := range promos {
			wanted[p.Key()] = true
		}
		b, err := ReadTopic(ctx, s.Brokers, wanted)
		if err != nil {
			return snap, err
		}
		snap.Broker = b
	}
	return snap, nil
}

func readRedis(ctx context.Context, c redis.UniversalClient, key string) (PromoState, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var hash, pins, ips, ledger *redis.MapStringStringCmd
	var open *redis.IntCmd
	var pool *redis.ZSliceCmd
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		hash = p.HGetAll(ctx, key)
		pins = p.HGetAll(ctx, promo.PinsKey(key))
		ips = p.HGetAll(ctx, promo.IPsKey(key))
		ledger = p.HGetAll(ctx, promo.LedgerKey(key))
		open = p.ZCard(ctx, promo.PendingKey(key))
		pool = p.ZRangeWithScores(ctx, promo.EnvelopeKey(key), 0, -1)
		return nil
	})
	if err != nil {
		return PromoState{}, fmt.Errorf("read %s: %w", key, err)
	}
	st := PromoState{Found: len(hash.Val()) > 0, Pins: map[string]int64{}, IPs: map[string]int64{},
		Ledger: map[string]lua.LedgerEntry{}, Open: open.Val(), Pool: map[int]int64{}}
	h := hash.Val()
	var perr error
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil && perr == nil {
			perr = fmt.Errorf("read %s: %q is not a number", key, s)
		}
		return n
	}
	if st.Found {
		st.Total, st.Remaining = num(h["total"]), num(h["remaining"])
		if v, ok := h["envAmount"]; ok {
			st.EnvAmount, st.EnvLeft = num(v), num(h["envLeft"])
		}
	}
	if err := readPool(key, pool.Val(), st.Pool); err != nil {
		return st, err
	}
	for k, v := range pins.Val() {
		st.Pins[k] = num(v)
	}
	for k, v := range ips.Val() {
		st.IPs[k] = num(v)
	}
	for rid, raw := range ledger.Val() {
		var e lua.LedgerEntry
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			return st, fmt.Errorf("read %s: ledger entry %s: %w", key, rid, err)
		}
		st.Ledger[rid] = e
	}
	return st, perr
}

// readPool reads an envelope pool's sorted set (idx -> amount, each scored by its
// idx) into pool.
func readPool(key string, zs []redis.Z, pool map[int]int64) error {
	for _, z := range zs {
		m, _ := z.Member.(string)
		idx, amount, err := lua.ParseEnvelopeMember(m)
		if err != nil {
			return fmt.Errorf("read %s: %w", promo.EnvelopeKey(key), err)
		}
		if z.Score != float64(idx) {
			return fmt.Errorf("read %s: envelope %q scored %v, not by its idx", promo.EnvelopeKey(key), m, z.Score)
		}
		pool[idx] = amount
	}
	return nil
}

func (s Sources) readRecord(ctx context.Context, promos []Promotion, out map[string][]Row) error {
	if len(promos) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	const chunk = 200
	for start := 0; start < len(promos); start += chunk {
		part := promos[start:min(start+chunk, len(promos))]
		var conds []string
		var args []any
		for _, p := range part {
			conds = append(conds, "(promo_id = ? AND promo_type = ?)")
			args = append(args, p.PromoID, p.Type)
		}
		var rows []struct {
			EventID   string         `db:"event_id"`
			RequestID string         `db:"request_id"`
			Kind      string         `db:"kind"`
			Pin       string         `db:"pin"`
			IP        string         `db:"ip"`
			PromoID   string         `db:"promo_id"`
			Type      int            `db:"promo_type"`
			Num       int64          `db:"num"`
			Amount    sql.NullInt64  `db:"amount"`
			Parts     sql.NullString `db:"parts"`
		}
		q := `SELECT event_id, request_id, kind, pin, ip, promo_id, promo_type, num, amount, parts FROM grab_flow WHERE ` + strings.Join(conds, " OR ")
		if err := s.DB.SelectContext(ctx, &rows, q, args...); err != nil {
			return fmt.Errorf("read the flow log: %w", err)
		}
		for _, r := range rows {
			k := promo.Key(r.PromoID, r.Type)
			parts, err := flow.ParseParts(r.Parts.String)
			if err != nil {
				return fmt.Errorf("read the flow log: event %s of %s: %w", r.EventID, k, err)
			}
			out[k] = append(out[k], Row{RequestID: r.RequestID, Kind: r.Kind, Pin: r.Pin, IP: r.IP, Num: r.Num, EventID: r.EventID,
				Amount: r.Amount.Int64, Parts: parts})
		}
	}
	return nil
}

// readSplits reads each pool's split from the record (store.ReadEnvelopeSplit):
// its budget and its envelopes' amounts by idx.
func (s Sources) readSplits(ctx context.Context, promos []Promotion, out map[string]Split) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, p := range promos {
		if !p.IsPool() {
			continue
		}
		split, ok, err := store.ReadEnvelopeSplit(ctx, s.DB, store.ID{PromoID: p.PromoID, Type: p.Type})
		if err != nil {
			return fmt.Errorf("read the pool of %s: %w", p.Key(), err)
		}
		out[p.Key()] = Split{Found: ok, Amount: split.Amount, Parts: split.Parts}
	}
	return nil
}

// ReadTopic reads every event the broker holds on the flow topic, keeping the items
// of the wanted promotions (all when wanted is nil), as rows by promotion key.
func ReadTopic(ctx context.Context, brokers []string, wanted map[string]bool) (map[string][]Row, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	parts, err := partitions(ctx, c)
	if err != nil {
		return nil, err
	}
	out := map[string][]Row{}
	for _, p := range parts {
		if err := readPartition(ctx, brokers[0], p, func(offset int64, e flow.Event) {
			if e.Kind == flow.Confirm {
				return // a hold confirmed: it moves no stock, and the log has no row of it
			}
			for _, it := range e.Items {
				k := promo.Key(it.PromoID, it.Type)
				if wanted == nil || wanted[k] {
					out[k] = append(out[k], Row{RequestID: e.RequestID, Kind: string(e.Kind), Pin: e.Pin, IP: e.IP, Num: it.Num, EventID: e.EventID, Offset: offset,
						Amount: it.Amount, Parts: it.Parts})
				}
			}
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func readPartition(ctx context.Context, broker string, partition int, fn func(int64, flow.Event)) error {
	conn, err := kafka.DialLeader(ctx, "tcp", broker, flow.Topic, partition)
	if err != nil {
		return fmt.Errorf("kafka partition %d: %w", partition, err)
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	first, last, err := conn.ReadOffsets()
	if err != nil {
		return fmt.Errorf("kafka partition %d offsets: %w", partition, err)
	}
	if _, err := conn.Seek(first, kafka.SeekAbsolute); err != nil {
		return fmt.Errorf("kafka partition %d seek: %w", partition, err)
	}
	for off := first; off < last; {
		batch := conn.ReadBatchWith(kafka.ReadBatchConfig{MinBytes: 1, MaxBytes: 16 << 20, MaxWait: time.Second})
		read := 0
		for {
			m, err := batch.ReadMessage()
			if err != nil {
				break
			}
			read++
			off = m.Offset + 1
			if e, err := flow.Decode(m.Value); err == nil {
				fn(m.Offset, e)
			}
		}
		if err := batch.Close(); err != nil && !errors.Is(err, context.DeadlineExceeded) && read == 0 {
			return fmt.Errorf("kafka partition %d at offset %d: %w", partition, off, err)
		}
		if read == 0 {
			return fmt.Errorf("kafka partition %d: no progress at offset %d of %d", partition, off, last)
		}
	}
	return nil
}

// merge adds bucket b's state to a promotion's: totals, remaining and counters
// add up; of a request's ledger entries (one per bucket its grab touched) the
// one that holds its stock stands for it, as an ordinary promotion's entry does.
// first says b is bucket 0, which also says whether the promotion exists.
func merge(st, b PromoState, first bool) PromoState {
	if first {
		st = PromoState{Found: b.Found, Pins: map[string]int64{}, IPs: map[string]int64{}, Ledger: map[string]lua.LedgerEntry{}, NoIP: map[string]bool{}}
	}
	st.Total += b.Total
	st.Remaining += b.Remaining
	if first { // a pool is of one bucket only
		st.EnvAmount, st.EnvLeft, st.Pool = b.EnvAmount, b.EnvLeft, b.Pool
	}
	st.Open += b.Open
	for who, n := range b.Pins {
		st.Pins[who] += n
	}
	for who, n := range b.IPs {
		st.IPs[who] += n
	}
	for rid, e := range b.Ledger {
		if promo.HoldsStock(e.Part) {
			st.Ledger[rid] = e
		}
		if strings.Contains(e.Part, promo.PartNoIP) { // the pin's part says so
			st.NoIP[rid] = true
		}
	}
	return st
}
