package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/flashsale/platform/internal/flow"
)

// annotateChunk bounds the placeholders of one UPDATE.
const annotateChunk = 200

// AnnotateFlows stores what the request ledger needs beyond InsertFlows' columns:
// each GRAB's body hash and each CANCEL's reason (migration 0002). Call it after
// InsertFlows with the same events, before acknowledging them: it only fills empty
// fields, so running it again (a redelivery) changes nothing, and a crash between
// the two calls is repaired by the redelivery that follows.
func (s *Store) AnnotateFlows(ctx context.Context, events []flow.Event) error {
	var hashes, reasons [][2]string
	for _, e := range events {
		switch {
		case e.Kind == flow.Grab && e.BodyHash != "":
			hashes = append(hashes, [2]string{e.RequestID, e.BodyHash})
		case e.Kind == flow.Cancel && e.Reason != "":
			reasons = append(reasons, [2]string{e.RequestID, e.Reason})
		}
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("annotate flows: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, u := range []struct {
		kind, col string
		pairs     [][2]string
	}{{"GRAB", "body_hash", hashes}, {"CANCEL", "reason", reasons}} {
		for len(u.pairs) > 0 {
			n := min(len(u.pairs), annotateChunk)
			q, args := annotateSQL(u.kind, u.col, u.pairs[:n])
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return fmt.Errorf("annotate flows: %s %s: %w", u.kind, u.col, err)
			}
			u.pairs = u.pairs[n:]
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("annotate flows: commit: %w", err)
	}
	return nil
}

// annotateSQL sets col from a request_id -> value CASE, only where it is still empty.
// kind and col are constants of AnnotateFlows, never input.
func annotateSQL(kind, col string, pairs [][2]string) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 3*len(pairs))
	b.WriteString("UPDATE grab_flow SET " + col + " = CASE request_id")
	for _, p := range pairs {
		b.WriteString(" WHEN ? THEN ?")
		args = append(args, p[0], p[1])
	}
	b.WriteString(" ELSE " + col + " END WHERE kind = '" + kind + "' AND " + col + " = '' AND request_id IN (")
	for i, p := range pairs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("?")
		args = append(args, p[0])
	}
	b.WriteString(")")
	return b.String(), args
}
