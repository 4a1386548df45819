-- 0017_proposals_status: the approval queue read by status, newest first (GET
-- /v1/proposals?status=PENDING, which the console polls): WHERE status = ? AND
-- id < ? ORDER BY id DESC reads this index backwards, no sort. proposals_pending
-- (status, promo_id, type, id) serves the bounds' counts, not this order.
--
-- Guarded like 0014: the index is made only when missing (MySQL has no CREATE
-- INDEX IF NOT EXISTS).

SET @s = (SELECT IF(COUNT(*) = 0,
  'CREATE INDEX proposals_status ON proposals (status, id)',
  'DO 0')
  FROM information_schema.statistics
  WHERE table_schema = DATABASE() AND table_name = 'proposals' AND index_name = 'proposals_status');
PREPARE add_proposals_status FROM @s;
EXECUTE add_proposals_status;
DEALLOCATE PREPARE add_proposals_status;
