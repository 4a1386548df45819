-- 0015_proposals: changes of a promotion waiting for an approver (docs/CONTRACT.md,
-- "Approval"). With approval on, promo-admin records a merchandiser's create, or a
-- patch of total, limits or window, here instead of applying it; nothing of it
-- reaches Redis until an approver who is not the proposer approves it.
--   kind          CREATE or PATCH
--   base_version  the promotion's version the proposal was made against (0: a create);
--                 an approval finds the promotion moved on from it and is refused
--   body_json     the request's body as the proposer sent it, validated
--   status        PENDING, then APPROVED or REJECTED (once: decided_* are set then)
--   reason        the approver's reason for a rejection ('' otherwise)
-- proposals_pending bounds the queue: pending ones per promotion and in all.

CREATE TABLE IF NOT EXISTS proposals (
  id            BIGINT NOT NULL AUTO_INCREMENT,
  promo_id      VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  type          TINYINT NOT NULL,
  kind          VARCHAR(8) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  base_version  BIGINT NOT NULL,
  body_json     MEDIUMTEXT NOT NULL,
  proposer      VARCHAR(128) NOT NULL,
  proposer_role VARCHAR(32) NOT NULL,
  proposed_at   DATETIME(3) NOT NULL,
  status        VARCHAR(16) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  decided_by    VARCHAR(128) NOT NULL DEFAULT '',
  decided_role  VARCHAR(32) NOT NULL DEFAULT '',
  decided_at    DATETIME(3) NULL,
  reason        VARCHAR(500) NOT NULL DEFAULT '',
  PRIMARY KEY (id),
  KEY proposals_pending (status, promo_id, type, id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
