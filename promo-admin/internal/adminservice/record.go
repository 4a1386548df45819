package adminservice

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/platform/internal/store"
)

// What the service uses of the MySQL record, one interface a collaborator; the
// store's promotion table satisfies them all (Record).

// Journal is the row as the journal of its own changes (journal.go): propose,
// promote or discard, and the changes left pending. EnvelopeParts reads back a
// pool's split for the Redis create.
type Journal interface {
	Row(ctx context.Context, id store.ID) (store.Promotion, error)
	Update(ctx context.Context, id store.ID, fn func(p *store.Promotion) error) (store.Promotion, error)
	Promote(ctx context.Context, id store.ID, version int64, at time.Time) (store.Promotion, error)
	Discard(ctx context.Context, id store.ID, version int64) error
	Pending(ctx context.Context, before time.Time, limit int) ([]store.ID, error)
	EnvelopeParts(ctx context.Context, id store.ID) ([]int64, error)
}

// Inserter adds the row of a create; Row tells who holds a key already taken.
type Inserter interface {
	InsertPool(ctx context.Context, p store.Promotion, parts []int64) error
	Row(ctx context.Context, id store.ID) (store.Promotion, error)
}

// Getter reads a committed row.
type Getter interface {
	Get(ctx context.Context, id store.ID) (store.Promotion, error)
}

// Auditor reads a promotion's audit trail; Row tells a promotion with none from
// one the record never had.
type Auditor interface {
	History(ctx context.Context, id store.ID, limit int) ([]store.AuditEntry, error)
	Row(ctx context.Context, id store.ID) (store.Promotion, error)
}

// Lister pages through the record.
type Lister interface {
	List(ctx context.Context, q store.ListQuery) (store.Page, error)
}

// Record is everything New hands out to the service's parts.
type Record interface {
	Journal
	Inserter
	Getter
	Auditor
	Lister
	Timeliner
}

// Shards is the Redis side: the shard and client of a key, and a shard's client
// (shardpool.Pool).
type Shards interface {
	For(key string) (shard int, c *redis.Client)
	Client(shard int) *redis.Client
}
