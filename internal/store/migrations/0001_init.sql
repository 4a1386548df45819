-- 0001_init: the two contract tables (docs/CONTRACT.md, "MySQL").
-- Ids that become Redis keys or ledger fields compare byte for byte (utf8mb4_bin):
-- Redis keys are case-sensitive, so "A" and "a" are two promotions.

CREATE TABLE IF NOT EXISTS promotion (
  promo_id            VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  promo_type          INT NOT NULL,
  title               VARCHAR(200) NOT NULL DEFAULT '',
  total               BIGINT NOT NULL,
  per_pin_limit       BIGINT NOT NULL DEFAULT 0,
  per_ip_limit        BIGINT NOT NULL DEFAULT 0,
  max_per_grab        BIGINT NOT NULL DEFAULT 1,
  rate_limit          BIGINT NOT NULL DEFAULT 0,
  rate_window_seconds BIGINT NOT NULL DEFAULT 0,
  start_at            DATETIME(3) NOT NULL,
  end_at              DATETIME(3) NOT NULL,
  state               VARCHAR(16) NOT NULL,
  version             BIGINT NOT NULL DEFAULT 0,
  remaining           BIGINT NOT NULL,
  pending             JSON NULL,
  pending_version     BIGINT NULL,
  pending_at          DATETIME(3) NULL,
  created_at          DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at          DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (promo_id, promo_type),
  KEY promotion_newest (created_at, promo_id, promo_type),
  KEY promotion_pending (pending_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE IF NOT EXISTS grab_flow (
  id          BIGINT NOT NULL AUTO_INCREMENT,
  event_id    VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  kind        ENUM('GRAB', 'CANCEL') NOT NULL,
  request_id  VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  pin         VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  ip          VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  promo_id    VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  promo_type  INT NOT NULL,
  num         BIGINT NOT NULL,
  shard       INT NOT NULL,
  occurred_at DATETIME(3) NOT NULL,
  written_at  DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY grab_flow_request (request_id, kind, promo_id, promo_type),
  KEY grab_flow_promo (promo_id, promo_type)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
