-- 0013_switch_history: every change of the on-call switches document (docs/CONTRACT.md,
-- "Config center"), kept beside the promotion audit: who, when, how, and the document
-- before and after. promo-admin writes one row a change:
--   via API        PUT /v1/switches, under the on-call token's name; the row is written
--                  before the document is published (outcome UNCONFIRMED) and marked
--                  APPLIED once the config store took it; a publish the store refused
--                  removes it, so a change that never happened leaves no row
--   via DETECTED   a document promo-admin found in force that no row names: written
--                  outside the API (configctl --break-glass, the Nacos console, an
--                  edited file); actor and role are ''
--   reason         what the caller said the change is for ('' for none)
--   store          where the document lives (file:<path>, nacos://...)
--   before_doc     the document replaced, as published (NULL: none, or not known)
--   changes_json   the switches that differ, as GET /v1/switches/history shows them
-- switch_history_after finds the rows of a version when a document is seen in force.

CREATE TABLE IF NOT EXISTS switch_history (
  id           BIGINT NOT NULL AUTO_INCREMENT,
  at           DATETIME(3) NOT NULL,
  actor        VARCHAR(128) NOT NULL,
  role         VARCHAR(32) NOT NULL,
  via          VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  outcome      VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  reason       VARCHAR(500) NOT NULL DEFAULT '',
  store        VARCHAR(300) NOT NULL,
  before_md5   VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  after_md5    VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  before_doc   MEDIUMTEXT NULL,
  after_doc    MEDIUMTEXT NOT NULL,
  changes_json MEDIUMTEXT NOT NULL,
  PRIMARY KEY (id),
  KEY switch_history_after (after_md5, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
