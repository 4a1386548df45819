package store

import (
	"fmt"
	"strconv"
)

// idPage is keyset paging newest first, by an AUTO_INCREMENT id: a page reads ids
// below the cursor (the last id of the page before), one row more than it shows
// to know whether another page follows. The switch history and the approval queue
// page this way.
type idPage struct {
	before int64
	limit  int
}

// newIDPage checks limit (1..most) and cursor ("" for the first page) for what.
func newIDPage(what, cursor string, limit, most int) (idPage, error) {
	if limit < 1 || limit > most {
		return idPage{}, fmt.Errorf("store: %s: limit %d outside 1..%d", what, limit, most)
	}
	p := idPage{before: 1<<63 - 1, limit: limit}
	if cursor != "" {
		if !ValidSwitchCursor(cursor) {
			return idPage{}, fmt.Errorf("store: %s: %w", what, ErrBadCursor)
		}
		p.before, _ = strconv.ParseInt(cursor, 10, 64)
	}
	return p, nil
}

// fetch is the LIMIT to read: one row more than the page shows.
func (p idPage) fetch() int { return p.limit + 1 }

// trim cuts rows to the page and gives the next page's cursor ("" on the last).
func trimPage[T any](p idPage, rows []T, id func(T) int64) ([]T, string) {
	if len(rows) <= p.limit {
		return rows, ""
	}
	rows = rows[:p.limit]
	return rows, strconv.FormatInt(id(rows[p.limit-1]), 10)
}
