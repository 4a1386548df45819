-- 0016_channels: the sales channels (docs/CONTRACT.md, "Channels").
--   promotion.channels  the channels a promotion is sold on; '' (the empty set) is
--                       every channel. A SET keeps them in the hash's bit order
--                       (APP 1, WECHAT 2, QQ 4, WEB 8): channels + 0 is the bitmask
--   grab_flow.channel   the channel of the grab a GRAB row records (the event's
--                       channel); NULL when the grab named none, and on CANCEL rows
--                       (a CANCEL's channel is its request's GRAB's)
-- grab_flow_archive and grab_flow_early keep grab_flow's columns in order (rows
-- move between them with SELECT * or the same column list), so they get it too.
--
-- Guarded like 0014: each ALTER is prepared only when its column is missing
-- (MySQL has no ADD COLUMN IF NOT EXISTS).

SET @s = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE promotion ADD COLUMN channels SET(''APP'', ''WECHAT'', ''QQ'', ''WEB'') NOT NULL DEFAULT ''''',
  'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'promotion' AND column_name = 'channels');
PREPARE add_promotion_channels FROM @s;
EXECUTE add_promotion_channels;
DEALLOCATE PREPARE add_promotion_channels;

SET @s = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE grab_flow ADD COLUMN channel ENUM(''APP'', ''WECHAT'', ''QQ'', ''WEB'') NULL',
  'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'grab_flow' AND column_name = 'channel');
PREPARE add_flow_channel FROM @s;
EXECUTE add_flow_channel;
DEALLOCATE PREPARE add_flow_channel;

SET @s = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE grab_flow_archive ADD COLUMN channel ENUM(''APP'', ''WECHAT'', ''QQ'', ''WEB'') NULL',
  'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'grab_flow_archive' AND column_name = 'channel');
PREPARE add_archive_channel FROM @s;
EXECUTE add_archive_channel;
DEALLOCATE PREPARE add_archive_channel;

SET @s = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE grab_flow_early ADD COLUMN channel ENUM(''APP'', ''WECHAT'', ''QQ'', ''WEB'') NULL',
  'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'grab_flow_early' AND column_name = 'channel');
PREPARE add_early_channel FROM @s;
EXECUTE add_early_channel;
DEALLOCATE PREPARE add_early_channel;
