// Package store is the MySQL/MariaDB system of record: the versioned schema
// migrations (migrations/NNNN_name.sql, applied once each, in order, by Open) and
// the promotion repository.
//
// The promotion row is the journal of its own changes: Propose records the whole
// intended change in the row's pending columns (pending, pending_version =
// version+1, pending_at; a row with a change pending refuses another, ErrBusy),
// the caller applies it to Redis, then Promote makes it the committed row or
// Discard drops it. A create's row has version 0 until promoted, invisible to Get
// and List; readers see only committed columns. Pending lists the rows a resolver
// must look at. Why: docs/design.md, "The promotion row is the journal of its own
// changes".
//
// Times are stored in UTC with millisecond precision (DATETIME(3)).
package store
