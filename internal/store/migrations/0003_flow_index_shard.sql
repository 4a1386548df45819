-- 0003_flow_index_shard: the shard of each GRAB's request index entry (the ring's
-- shard of R_<requestId>), so the rebuild of a shard restores the index entries that
-- lived on it by one indexed read of their rows, not a scan of the whole log:
--   index_shard  ring shard of R_<request_id>; -1 on rows written before this migration
-- store.InsertFlows writes it with the row (the flow sink and degrade mode alike).
--
-- Guarded like 0002: the ALTER is prepared only when the column is missing.

SET @s = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE grab_flow ADD COLUMN index_shard INT NOT NULL DEFAULT -1, ADD KEY grab_flow_index (index_shard, request_id)',
  'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'grab_flow' AND column_name = 'index_shard');
PREPARE add_flow_index_shard FROM @s;
EXECUTE add_flow_index_shard;
DEALLOCATE PREPARE add_flow_index_shard;
