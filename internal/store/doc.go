// Package store is the MySQL/MariaDB system of record: the versioned schema
// migrations (migrations/NNNN_name.sql, applied once each, in order, by Open) and
// the promotion repository.
//
// # The promotion row is the journal of its own changes
//
// A promotion lives twice: as its row here and as the C_<promoId>_<type> hash on its
// Redis shard. No transaction spans both, so every admin change goes through three
// steps, and the row says at each moment which step a change has reached:
//
//  1. Propose: one transaction (SELECT ... FOR UPDATE) records the intended change in
//     the row's pending columns: the full new spec and state as JSON (pending), its
//     version (pending_version = version+1) and when (pending_at). A row that already
//     has a pending change refuses another (ErrBusy). A create inserts its row with
//     version 0 and the pending spec; rows of version 0 are invisible to Get and List.
//  2. The caller applies the change to Redis with the version-guarded admin script,
//     ver = pending_version (package lua).
//  3. Promote: one transaction copies the pending spec, state and version onto the
//     row and clears pending. Discard instead clears pending (and removes the
//     version-0 row of a create) when the change did not happen.
//
// Readers see only committed columns, never a half-done change. A change stuck
// between steps (Redis or the process failed) stays pending; its resolver reads the
// hash's ver on the shard: if the shard holds pending_version the change happened
// and is promoted, otherwise it is discarded. Pending lists the rows to look at.
//
// Times are stored in UTC with millisecond precision (DATETIME(3)).
package store
