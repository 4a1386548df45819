-- 0014_flow_no_ip: a bucketed grab that counted its ip nowhere (flow.Item.NoIP).
--   grab_flow.no_ip  1 when the grab's parts were its stock bucket's and its pin's
--                    home's alone (q.lua's letter n, while the promotion had no ip
--                    limit); the rebuild and a cancel recompute the parts from it
-- grab_flow_archive and grab_flow_early keep grab_flow's columns in order (rows
-- move between them with SELECT * or the same column list), so they get it too.
--
-- Guarded like 0006: each ALTER is prepared only when its column is missing
-- (MySQL has no ADD COLUMN IF NOT EXISTS).

SET @s = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE grab_flow ADD COLUMN no_ip TINYINT NOT NULL DEFAULT 0',
  'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'grab_flow' AND column_name = 'no_ip');
PREPARE add_flow_no_ip FROM @s;
EXECUTE add_flow_no_ip;
DEALLOCATE PREPARE add_flow_no_ip;

SET @s = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE grab_flow_archive ADD COLUMN no_ip TINYINT NOT NULL DEFAULT 0',
  'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'grab_flow_archive' AND column_name = 'no_ip');
PREPARE add_archive_no_ip FROM @s;
EXECUTE add_archive_no_ip;
DEALLOCATE PREPARE add_archive_no_ip;

SET @s = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE grab_flow_early ADD COLUMN no_ip TINYINT NOT NULL DEFAULT 0',
  'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'grab_flow_early' AND column_name = 'no_ip');
PREPARE add_early_no_ip FROM @s;
EXECUTE add_early_no_ip;
DEALLOCATE PREPARE add_early_no_ip;
