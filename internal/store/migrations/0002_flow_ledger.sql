-- 0002_flow_ledger: what the request ledger needs beyond the contract's columns, so a
-- lost Redis shard is rebuilt from the record exactly (bin/recovery rebuild):
--   body_hash  the GRAB's request body fingerprint (ledger field "h"); '' if unknown
--   reason     the CANCEL's reason (ledger field "r"; ROLLBACK marks an abort)
-- store.InsertFlows writes both with the row (the flow sink and degrade mode alike).
--
-- MySQL has no ADD COLUMN IF NOT EXISTS (MariaDB has), so the ALTER is prepared only
-- when the column is missing: re-running the file after a crash changes nothing.
-- The statements share one connection (see migrate), so @s survives between them.

SET @s = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE grab_flow ADD COLUMN body_hash VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT '''', ADD COLUMN reason VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL DEFAULT ''''',
  'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'grab_flow' AND column_name = 'body_hash');
PREPARE add_flow_ledger FROM @s;
EXECUTE add_flow_ledger;
DEALLOCATE PREPARE add_flow_ledger;
