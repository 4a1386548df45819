package adminservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/flashsale/platform/configcenter"
	"github.com/flashsale/platform/internal/store"
)

// Switches is what on-call does through promo-admin: change the switches document
// under their token's name, and read who changed it.
type Switches interface {
	PutSwitches(ctx context.Context, c SwitchesChange) (SwitchesResult, error)
	SwitchHistory(ctx context.Context, q SwitchHistoryQuery) (store.SwitchPage, error)
}

// SwitchesChange is a whole new document, published only over version IfMD5 of
// the document in force ("" meaning none yet).
type SwitchesChange struct {
	Document []byte
	IfMD5    string
	Reason   string
}

// SwitchesResult answers a change: the version now in force, whether it changed,
// and the history entry that records it (none when nothing changed).
type SwitchesResult struct {
	MD5     string             `json:"md5"`
	Changed bool               `json:"changed"`
	Entry   *store.SwitchEntry `json:"entry,omitempty"`
}

// SwitchHistoryQuery asks for a page of the switch history, newest first.
type SwitchHistoryQuery struct {
	Limit  int
	Cursor string
}

// ErrSwitchesChanged refuses a change made over a version no longer in force.
var ErrSwitchesChanged = errors.New("the switches document changed since it was read")

// SwitchRecord is the switch history (store.SwitchHistory).
type SwitchRecord interface {
	Record(ctx context.Context, c store.SwitchChange) (int64, error)
	Resolve(ctx context.Context, id int64, outcome string) error
	Page(ctx context.Context, cursor string, limit int) (store.SwitchPage, error)
	Observe(ctx context.Context, s store.Sighting) (int64, bool, error)
}

// SwitchDesk implements Switches over the config store and the switch history.
type SwitchDesk struct {
	store   configcenter.Store // nil: this instance publishes nothing
	check   func(doc []byte) (*configcenter.Snapshot, error)
	history SwitchRecord
	now     clock
	log     *slog.Logger
}

// NewSwitchDesk publishes to st (nil: changes answer 503) what check accepts
// (configcenter.Holder.Check) and records each change in history.
func NewSwitchDesk(st configcenter.Store, check func([]byte) (*configcenter.Snapshot, error), history SwitchRecord, cfg Config) *SwitchDesk {
	cfg = cfg.withDefaults()
	return &SwitchDesk{store: st, check: check, history: history, now: clock(cfg.Now), log: cfg.Logger}
}

var _ Switches = (*SwitchDesk)(nil)

// PutSwitches validates the document as every service will, records the change
// under the caller's name, publishes it over IfMD5 and records the outcome. The
// record is written first, so no change is ever in force unrecorded; a publish
// the store refused marks it FAILED, one whose fate is unknown leaves it
// UNCONFIRMED until the document is seen in force (RunRecorder).
func (d *SwitchDesk) PutSwitches(ctx context.Context, c SwitchesChange) (SwitchesResult, error) {
	if _, err := d.check(c.Document); err != nil {
		return SwitchesResult{}, invalid("document", "%v; nothing was published", err)
	}
	if d.store == nil {
		return SwitchesResult{}, &UnavailableError{Dependency: "config store", Msg: "this instance has no config store to publish to; nothing was published"}
	}
	cur, err := d.store.Get(ctx)
	if err != nil {
		return SwitchesResult{}, &UnavailableError{Dependency: "config store", Msg: "the document in force could not be read; nothing was published", Err: err}
	}
	next := configcenter.MD5(c.Document)
	switch {
	case cur.MD5 != c.IfMD5:
		return SwitchesResult{}, fmt.Errorf("%w: in force is md5 %q, not %q; read it again and decide again", ErrSwitchesChanged, cur.MD5, c.IfMD5)
	case cur.MD5 == next:
		return SwitchesResult{MD5: next}, nil
	}
	ch, err := d.change(ctx, cur, c)
	if err != nil {
		return SwitchesResult{}, err
	}
	id, err := d.history.Record(ctx, ch)
	if err != nil {
		return SwitchesResult{}, mysqlDown(err)
	}
	entry := entryOf(id, ch)
	if err := d.store.Publish(ctx, c.Document, cur.MD5); err != nil {
		return SwitchesResult{}, d.failed(ctx, id, err)
	}
	entry.Outcome = store.SwitchApplied
	if err := d.history.Resolve(ctx, id, store.SwitchApplied); err != nil {
		// In force and recorded; the recorder marks it APPLIED once it sees it.
		d.log.WarnContext(ctx, "switches published; the record stays UNCONFIRMED until the document is seen in force", "id", id, "err", err.Error())
		entry.Outcome = store.SwitchUnconfirmed
	}
	d.log.InfoContext(ctx, "switches published", "id", id, "md5", next, "over", cur.MD5, "actor", ch.Actor.Name)
	return SwitchesResult{MD5: next, Changed: true, Entry: &entry}, nil
}

// change is the record of c over the document in force.
func (d *SwitchDesk) change(ctx context.Context, cur configcenter.Document, c SwitchesChange) (store.SwitchChange, error) {
	diff, err := configcenter.Diff(cur.Content, c.Document)
	if err != nil {
		return store.SwitchChange{}, invalid("document", "%v; nothing was published", err)
	}
	changes, err := json.Marshal(nonNil(diff))
	if err != nil {
		return store.SwitchChange{}, fmt.Errorf("encode the changes: %w", err)
	}
	return store.SwitchChange{At: d.now.now(), Actor: actorOf(ctx), Via: store.SwitchViaAPI, Outcome: store.SwitchUnconfirmed,
		Reason: c.Reason, Store: d.store.Describe(), BeforeMD5: cur.MD5, AfterMD5: configcenter.MD5(c.Document),
		BeforeDoc: cur.Content, AfterDoc: c.Document, Changes: changes}, nil
}

// failed resolves the record of a publish that failed: FAILED when the store
// refused it (nothing changed), left UNCONFIRMED when its fate is unknown.
func (d *SwitchDesk) failed(ctx context.Context, id int64, err error) error {
	if errors.Is(err, configcenter.ErrConflict) {
		if rerr := d.history.Resolve(ctx, id, store.SwitchFailed); rerr != nil {
			d.log.WarnContext(ctx, "switch change refused by the store; its record stays UNCONFIRMED", "id", id, "err", rerr.Error())
		}
		return fmt.Errorf("%w: another change was published first; nothing was published", ErrSwitchesChanged)
	}
	return &UnavailableError{Dependency: "config store", Err: err,
		Msg: "the publish did not answer; the change may or may not be in force (GET /v1/switches shows the version in force; its history entry stays UNCONFIRMED until it is seen)"}
}

func entryOf(id int64, c store.SwitchChange) store.SwitchEntry {
	return store.SwitchEntry{ID: id, At: c.At, Actor: c.Actor, Via: c.Via, Outcome: c.Outcome, Reason: c.Reason, Store: c.Store,
		BeforeMD5: c.BeforeMD5, AfterMD5: c.AfterMD5, Changes: c.Changes}
}

func nonNil(cs []configcenter.Change) []configcenter.Change {
	if cs == nil {
		return []configcenter.Change{}
	}
	return cs
}

// SwitchHistory is a page of the switch history, newest first.
func (d *SwitchDesk) SwitchHistory(ctx context.Context, q SwitchHistoryQuery) (store.SwitchPage, error) {
	if q.Limit < 1 || q.Limit > store.MaxSwitchHistory {
		return store.SwitchPage{}, invalid("limit", "must be an integer from 1 to %d", store.MaxSwitchHistory)
	}
	if q.Cursor != "" && !store.ValidSwitchCursor(q.Cursor) {
		return store.SwitchPage{}, invalid("cursor", "is not a cursor this service gave out")
	}
	page, err := d.history.Page(ctx, q.Cursor, q.Limit)
	if err != nil {
		return store.SwitchPage{}, mysqlDown(err)
	}
	return page, nil
}

// RunRecorder records every version of the document this instance puts in force
// (holder's snapshots) until ctx ends: a version made through the API is marked
// APPLIED, one made elsewhere (a break-glass write, the Nacos console) is recorded
// DETECTED, once for all instances. A failed write is retried every retry.
func (d *SwitchDesk) RunRecorder(ctx context.Context, holder *configcenter.Holder, source string, retry time.Duration) error {
	seen := make(chan *configcenter.Snapshot, 1)
	holder.OnStore(func(s *configcenter.Snapshot) {
		select { // the newest wins: an older version no longer in force is the store's past
		case <-seen:
		default:
		}
		seen <- s
	})
	since := int64(-1) // the first sighting matches the newest row only
	for {
		var snap *configcenter.Snapshot
		select {
		case <-ctx.Done():
			return nil
		case snap = <-seen:
		}
		for snap.Doc != nil {
			id, detected, err := d.history.Observe(ctx, d.sighting(snap, source, since))
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				since = id
				if detected {
					d.log.Warn("switches changed outside promo-admin; recorded as DETECTED", "md5", snap.MD5, "id", id)
				}
				break
			}
			d.log.Error("switch history: the version in force is not recorded yet; retrying", "md5", snap.MD5, "err", err.Error())
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(retry):
			case newer := <-seen:
				snap = newer
			}
		}
	}
}

func (d *SwitchDesk) sighting(snap *configcenter.Snapshot, source string, since int64) store.Sighting {
	return store.Sighting{At: d.now.now(), Store: source, MD5: snap.MD5, Doc: snap.Doc, Since: since,
		Changes: func(before []byte) (json.RawMessage, error) {
			diff, err := configcenter.Diff(before, snap.Doc)
			if err != nil {
				return nil, err
			}
			return json.Marshal(nonNil(diff))
		}}
}
