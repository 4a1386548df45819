-- 0011_archive: the record kept in bounds (docs/CONTRACT.md, "MySQL"). Promotions
-- whose sale ended long ago (recovery archive, --older-than) are marked archived_at
-- and left out of what the shards must hold (rebuild, verify); their flow rows move,
-- unchanged (ids included), to grab_flow_archive, so grab_flow holds the live months.
-- The unique key (request_id, kind, promotion) is the record's deduplication; range
-- partitions by time would have to carry the time in it, and a redelivered event is
-- not bound to carry the same time: a table of the past keeps the key whole.

CREATE TABLE IF NOT EXISTS grab_flow_archive LIKE grab_flow;

ALTER TABLE promotion ADD COLUMN IF NOT EXISTS archived_at DATETIME(3) NULL;
