package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
)

// How a change of the switches document was made (switch_history.via).
const (
	// SwitchViaAPI is a change made through PUT /v1/switches, under a token's name.
	SwitchViaAPI = "API"
	// SwitchViaDetected is a version found in force that no row names: written
	// outside the API (a break-glass write, the Nacos console, an edited file).
	SwitchViaDetected = "DETECTED"
)

// What became of a change (switch_history.outcome).
const (
	// SwitchUnconfirmed is a change recorded and not (yet) known to be in force.
	SwitchUnconfirmed = "UNCONFIRMED"
	// SwitchApplied is a change the config store took.
	SwitchApplied = "APPLIED"
	// SwitchFailed is a change the config store refused: nothing changed.
	SwitchFailed = "FAILED"
)

// Switch history limits.
const (
	DefaultSwitchHistory = 20
	MaxSwitchHistory     = 100
)

// SwitchHistory is the record of the on-call switches document's changes
// (switch_history): who, when, how, and the document before and after.
type SwitchHistory struct {
	db *sqlx.DB
}

// NewSwitchHistory is the switch history of the record db holds (Store.DB).
func NewSwitchHistory(db *sqlx.DB) *SwitchHistory { return &SwitchHistory{db: db} }

// SwitchChange is one change to record.
type SwitchChange struct {
	At                  time.Time
	Actor               Actor
	Via, Outcome        string
	Reason, Store       string
	BeforeMD5, AfterMD5 string
	BeforeDoc           []byte // nil: no document before, or not known
	AfterDoc            []byte
	// Changes is the switches that differ, as JSON (configcenter.Diff's).
	Changes json.RawMessage
}

// SwitchEntry is one recorded change as GET /v1/switches/history shows it: the
// documents themselves stay in the record.
type SwitchEntry struct {
	ID        int64           `json:"id"`
	At        time.Time       `json:"at"`
	Actor     Actor           `json:"actor"`
	Via       string          `json:"via"`
	Outcome   string          `json:"outcome"`
	Reason    string          `json:"reason,omitempty"`
	Store     string          `json:"store"`
	BeforeMD5 string          `json:"beforeMd5"`
	AfterMD5  string          `json:"afterMd5"`
	Changes   json.RawMessage `json:"changes"`
}

// Record writes c and returns its id.
func (h *SwitchHistory) Record(ctx context.Context, c SwitchChange) (int64, error) {
	return recordSwitch(ctx, h.db, c)
}

func recordSwitch(ctx context.Context, db sqlx.ExecerContext, c SwitchChange) (int64, error) {
	var before any // NULL: none
	if c.BeforeDoc != nil {
		before = string(c.BeforeDoc)
	}
	changes := c.Changes
	if changes == nil {
		changes = json.RawMessage("[]")
	}
	r, err := db.ExecContext(ctx, `INSERT INTO switch_history
 (at, actor, role, via, outcome, reason, store, before_md5, after_md5, before_doc, after_doc, changes_json)
 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		ms(c.At), c.Actor.Name, c.Actor.Role, c.Via, c.Outcome, c.Reason, c.Store, c.BeforeMD5, c.AfterMD5, before, string(c.AfterDoc), string(changes))
	if err != nil {
		return 0, fmt.Errorf("store: record switch change: %w", err)
	}
	return r.LastInsertId()
}

// Resolve sets the outcome of an UNCONFIRMED change; one already resolved stays.
func (h *SwitchHistory) Resolve(ctx context.Context, id int64, outcome string) error {
	if _, err := h.db.ExecContext(ctx, `UPDATE switch_history SET outcome = ? WHERE id = ? AND outcome = ?`,
		outcome, id, SwitchUnconfirmed); err != nil {
		return fmt.Errorf("store: switch change %d %s: %w", id, outcome, err)
	}
	return nil
}

// SwitchPage is one page of the history, newest first; NextCursor is "" on the last.
type SwitchPage struct {
	Entries    []SwitchEntry `json:"entries"`
	NextCursor string        `json:"nextCursor,omitempty"`
}

// ValidSwitchCursor reports whether s is a cursor Page gives out.
func ValidSwitchCursor(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n > 0 && strconv.FormatInt(n, 10) == s
}

// Page reads up to limit (1..MaxSwitchHistory) changes, newest first, after cursor
// (the NextCursor of the page before; "" for the first page).
func (h *SwitchHistory) Page(ctx context.Context, cursor string, limit int) (SwitchPage, error) {
	p, err := newIDPage("switch history", cursor, limit, MaxSwitchHistory)
	if err != nil {
		return SwitchPage{}, err
	}
	type row struct {
		ID        int64     `db:"id"`
		At        time.Time `db:"at"`
		Actor     string    `db:"actor"`
		Role      string    `db:"role"`
		Via       string    `db:"via"`
		Outcome   string    `db:"outcome"`
		Reason    string    `db:"reason"`
		Store     string    `db:"store"`
		BeforeMD5 string    `db:"before_md5"`
		AfterMD5  string    `db:"after_md5"`
		Changes   string    `db:"changes_json"`
	}
	var rows []row
	if err := h.db.SelectContext(ctx, &rows, `SELECT id, at, actor, role, via, outcome, reason, store, before_md5, after_md5, changes_json
 FROM switch_history WHERE id < ? ORDER BY id DESC LIMIT ?`, p.before, p.fetch()); err != nil {
		return SwitchPage{}, fmt.Errorf("store: switch history: %w", err)
	}
	rows, next := trimPage(p, rows, func(r row) int64 { return r.ID })
	page := SwitchPage{Entries: make([]SwitchEntry, 0, len(rows)), NextCursor: next}
	for _, r := range rows {
		page.Entries = append(page.Entries, SwitchEntry{ID: r.ID, At: r.At.UTC(), Actor: Actor{Name: r.Actor, Role: r.Role},
			Via: r.Via, Outcome: r.Outcome, Reason: r.Reason, Store: r.Store, BeforeMD5: r.BeforeMD5, AfterMD5: r.AfterMD5,
			Changes: json.RawMessage(r.Changes)})
	}
	return page, nil
}

// Sighting is a version of the document found in force by one instance.
type Sighting struct {
	At    time.Time
	Store string
	MD5   string
	Doc   []byte
	// Since is the id of the last row this instance matched (Observe's answer); a
	// row newer than it naming MD5 is this version's. Negative, for the first
	// sighting of a process: only the newest row counts.
	Since int64
	// Changes computes the changes from the version before (nil: none known).
	Changes func(before []byte) (json.RawMessage, error)
}

// Observe makes sure the version s saw is recorded: a row newer than s.Since
// naming it is its record (an UNCONFIRMED one is then APPLIED: the store took
// it); without one the version was written outside the API, and a DETECTED row
// records it, its version before being the newest row's. Instances that see it
// at once record it once: they take turns under a named lock. It returns the id
// of the row that records the version.
func (h *SwitchHistory) Observe(ctx context.Context, s Sighting) (id int64, detected bool, err error) {
	conn, err := h.db.Connx(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("store: observe switches %s: %w", s.MD5, err)
	}
	defer conn.Close()
	var got *int
	if err := conn.QueryRowxContext(ctx, "SELECT GET_LOCK(CONCAT('flashsale.switches.', DATABASE()), 10)").Scan(&got); err != nil || got == nil || *got != 1 {
		return 0, false, fmt.Errorf("store: observe switches %s: lock not granted: %v", s.MD5, err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(CONCAT('flashsale.switches.', DATABASE()))") //nolint:errcheck // closing the connection releases it too
	if id, ok, err := matchSighting(ctx, conn, s); err != nil || ok {
		return id, false, err
	}
	id, err = detect(ctx, conn, s)
	return id, err == nil, err
}

// matchSighting finds the row that records s's version, marking it APPLIED.
func matchSighting(ctx context.Context, conn *sqlx.Conn, s Sighting) (int64, bool, error) {
	var row struct {
		ID       int64  `db:"id"`
		AfterMD5 string `db:"after_md5"`
		Outcome  string `db:"outcome"`
	}
	q := `SELECT id, after_md5, outcome FROM switch_history WHERE after_md5 = ? AND id > ? AND outcome <> 'FAILED' ORDER BY id DESC LIMIT 1`
	args := []any{s.MD5, s.Since}
	if s.Since < 0 {
		q = `SELECT id, after_md5, outcome FROM switch_history WHERE outcome <> 'FAILED' ORDER BY id DESC LIMIT 1`
		args = nil
	}
	err := conn.GetContext(ctx, &row, q, args...)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("store: observe switches %s: %w", s.MD5, err)
	case row.AfterMD5 != s.MD5:
		return 0, false, nil
	}
	if row.Outcome == SwitchUnconfirmed {
		if _, err := conn.ExecContext(ctx, `UPDATE switch_history SET outcome = ? WHERE id = ? AND outcome = ?`,
			SwitchApplied, row.ID, SwitchUnconfirmed); err != nil {
			return 0, false, fmt.Errorf("store: observe switches %s: %w", s.MD5, err)
		}
	}
	return row.ID, true, nil
}

// detect records s's version as written outside the API.
func detect(ctx context.Context, conn *sqlx.Conn, s Sighting) (int64, error) {
	var prev struct {
		MD5 string  `db:"after_md5"`
		Doc *string `db:"after_doc"`
	}
	err := conn.GetContext(ctx, &prev, `SELECT after_md5, after_doc FROM switch_history WHERE outcome <> 'FAILED' ORDER BY id DESC LIMIT 1`)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("store: observe switches %s: %w", s.MD5, err)
	}
	c := SwitchChange{At: s.At, Via: SwitchViaDetected, Outcome: SwitchApplied, Store: s.Store,
		BeforeMD5: prev.MD5, AfterMD5: s.MD5, AfterDoc: s.Doc}
	if prev.Doc != nil {
		c.BeforeDoc = []byte(*prev.Doc)
	}
	if s.Changes != nil {
		if c.Changes, err = s.Changes(c.BeforeDoc); err != nil {
			return 0, fmt.Errorf("store: observe switches %s: %w", s.MD5, err)
		}
	}
	return recordSwitch(ctx, conn, c)
}
