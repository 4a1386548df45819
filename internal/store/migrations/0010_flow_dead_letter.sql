-- 0010_flow_dead_letter: the flow messages the sink sent to the dead-letter topic,
-- one row per promotion a message names (none it can tell: promo_id ''), so a
-- rebuild or verify of a promotion whose record may lack an event refuses, or says
-- so, until the event is replayed (its row is then in grab_flow or
-- grab_flow_early) or on-call overrides (--ignore-dead-letters).

CREATE TABLE IF NOT EXISTS flow_dead_letter (
  id          BIGINT NOT NULL AUTO_INCREMENT,
  source      VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  request_id  VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  kind        VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  promo_id    VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  promo_type  INT NOT NULL,
  cause       VARCHAR(512) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  dead_at     DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY flow_dead_letter_source (source, request_id, promo_id, promo_type),
  KEY flow_dead_letter_promo (promo_id, promo_type)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
