-- 0008_grab_hold: the holds of held grants (docs/CONTRACT.md, "Holds"), so a rebuilt
-- shard restores the holds still open, at their deadlines, and never one that was paid:
--   request_id     the held grab
--   index_shard    ring shard of R_<request_id>, where its hold lives (as 0003's)
--   hold_until_ms  the hold's deadline, unix ms, from the GRAB's holdUntil (0 until
--                  the GRAB is in: a CONFIRM may be written first in degrade mode)
--   confirmed_at   when its CONFIRM came; NULL while the hold is open
-- store.InsertFlows writes it with the flow rows, in their transaction.

CREATE TABLE IF NOT EXISTS grab_hold (
  request_id    VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  index_shard   INT NOT NULL,
  hold_until_ms BIGINT NOT NULL,
  confirmed_at  DATETIME(3) NULL,
  PRIMARY KEY (request_id),
  KEY grab_hold_shard (index_shard, hold_until_ms)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
