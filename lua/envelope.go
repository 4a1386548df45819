package lua

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/promo"
)

// Envelope is what a take of an envelope pool's item handed out, or a return gave
// back: the sum of its parts and their indexes in the pool (0-based, in the order
// the pool hands them out). The zero Envelope is an item of no pool.
type Envelope struct {
	Amount int64
	Parts  []int
}

// IsPool reports whether the item was one of an envelope pool.
func (e Envelope) IsPool() bool { return len(e.Parts) > 0 }

// EnvelopeMember is a pool part as the pool's sorted set and the ledger's field e
// hold it: "<index>:<amount>".
func EnvelopeMember(index int, amount int64) string {
	return strconv.Itoa(index) + ":" + strconv.FormatInt(amount, 10)
}

// ParseEnvelopeMember reads EnvelopeMember's form.
func ParseEnvelopeMember(m string) (index int, amount int64, err error) {
	i, a, ok := strings.Cut(m, ":")
	if ok {
		index, err = strconv.Atoi(i)
		if err == nil {
			amount, err = strconv.ParseInt(a, 10, 64)
		}
	}
	if !ok || err != nil || index < 0 || amount < 0 {
		return 0, 0, fmt.Errorf("envelope part %q: want <index>:<amount>", m)
	}
	return index, amount, nil
}

// EnvelopeParts is the ledger's field e of a take of parts: their members joined
// by commas, in the order taken.
func EnvelopeParts(parts []int, amounts []int64) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(EnvelopeMember(p, amounts[p]))
	}
	return b.String()
}

// EnvelopeDigest fingerprints a pool's split (amounts in hand-out order): the
// hash keeps it as envDigest, so create.lua tells a repeat of a create from
// another create of the same version whose split came out otherwise, and the
// rebuild writes it from the record's split.
func EnvelopeDigest(amounts []int64) string {
	h := sha256.New()
	var b []byte
	for _, a := range amounts {
		b = strconv.AppendInt(b[:0], a, 10)
		h.Write(append(b, ','))
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// MaxEnvelopeStage is how many parts one ZADD of a pool's staging carries: a pool
// of any size is loaded in calls of bounded work.
const MaxEnvelopeStage = 1000

// envelopeStageTTL bounds how long parts staged by a create that never ran stay.
const envelopeStageTTL = 10 * time.Minute

// stageEnvelope loads the pool's parts (amounts in hand-out order) into the
// staging key create.lua moves whole, a bounded chunk per command.
func stageEnvelope(ctx context.Context, c redis.Cmdable, key string, amounts []int64) error {
	staging := promo.EnvelopeStagingKey(key)
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Unlink(ctx, staging)
		for from := 0; from < len(amounts); from += MaxEnvelopeStage {
			chunk := make([]redis.Z, 0, MaxEnvelopeStage)
			for i := from; i < min(from+MaxEnvelopeStage, len(amounts)); i++ {
				chunk = append(chunk, redis.Z{Score: float64(i), Member: EnvelopeMember(i, amounts[i])})
			}
			p.ZAdd(ctx, staging, chunk...)
		}
		p.PExpire(ctx, staging, envelopeStageTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("stage the pool of %s: %w", key, err)
	}
	return nil
}

// parseEnvelopes reads the envelopes array q.lua and return.lua append to a reply
// (one array per item: {amount, index...}, {} for an item of no pool).
func parseEnvelopes(v interface{}, script string) ([]Envelope, error) {
	items, ok := v.([]interface{})
	if !ok {
		return nil, fmt.Errorf("%s: envelopes are %T, want an array", script, v)
	}
	out := make([]Envelope, len(items))
	for i, it := range items {
		vals, ok := it.([]interface{})
		if !ok {
			return nil, fmt.Errorf("%s: envelope %d is %T, want an array", script, i, it)
		}
		for j, x := range vals {
			n, ok := x.(int64)
			if !ok {
				return nil, fmt.Errorf("%s: envelope %d value %d is %T, want an integer", script, i, j, x)
			}
			if j == 0 {
				out[i].Amount = n
			} else {
				out[i].Parts = append(out[i].Parts, int(n))
			}
		}
	}
	return out, nil
}
