-- 0004_owed_cancel: CANCELs grab-service owes but could write nowhere yet (store/owed.go):
-- Kafka refused them and their GRAB was not in grab_flow, where a CANCEL without its
-- GRAB is skipped. A copy waits here, one row per item, until its GRAB arrives and
-- SettleOwedCancels writes it into grab_flow (the rebuild runs it first).
--   event        the CANCEL as a flow event (contract JSON) holding this item alone
--   occurred_at  the CANCEL's occurredAt: only a GRAB that occurred before it is its own
--                (a later GRAB of the requestId is a retry granted afresh)
--   owed_at      when it was first owed; rows older than a day are dropped

CREATE TABLE IF NOT EXISTS owed_cancel (
  request_id  VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  promo_id    VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  promo_type  INT NOT NULL,
  event       TEXT NOT NULL,
  occurred_at DATETIME(3) NOT NULL,
  owed_at     DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (request_id, promo_id, promo_type),
  KEY owed_cancel_at (owed_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
