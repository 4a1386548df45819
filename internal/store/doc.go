// Package store is the MySQL/MariaDB system of record: the versioned schema
// migrations (migrations/NNNN_name.sql, applied once each, in order, by Migrate,
// as the migrator; Connect, a service's way in, only checks they were) and a type
// for the tables each kind of caller uses (Store's fields). The promotion
// row is the journal of its own changes: Propose records the whole change in its
// pending columns, Promote makes it the committed row or Discard drops it; readers
// see only committed columns. How and why: docs/design.md, "The promotion row is
// the journal of its own changes". Times are stored in UTC with millisecond
// precision (DATETIME(3)).
package store
