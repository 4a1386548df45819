-- 0005_promotion_audit: who changed a promotion, when, and from what to what. One row
-- per change that landed (create, patch, stop, delete), written in the transaction
-- that makes the change committed (Store.Promote), so a change discarded leaves none.
--   actor, role  the token's name and role (httpx.Actor); "" for none
--   before       the promotion as it stood (JSON: state and spec); NULL for a create
--   after        the promotion as the change left it

CREATE TABLE IF NOT EXISTS promotion_audit (
  id          BIGINT NOT NULL AUTO_INCREMENT,
  promo_id    VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  promo_type  INT NOT NULL,
  at          DATETIME(3) NOT NULL,
  actor       VARCHAR(128) NOT NULL,
  role        VARCHAR(32) NOT NULL,
  action      VARCHAR(16) NOT NULL,
  before_json TEXT NULL,
  after_json  TEXT NOT NULL,
  PRIMARY KEY (id),
  KEY promotion_audit_promo (promo_id, promo_type, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
