-- 0006_buckets: a promotion split over several shards (internal/bucket).
--   promotion.buckets  the number of buckets, 1 for an ordinary promotion; fixed at create
--   grab_flow.bucket   the bucket a GRAB's units came from (a CANCEL's went back to), 0..buckets-1
--   grab_flow.buckets  the promotion's bucket count when the row was written
-- A grab takes each item's units from one bucket, so grab_flow's unique key
-- (request_id, kind, promo_id, promo_type) stays as it was.
--
-- Guarded like 0002: each ALTER is prepared only when its column is missing.

SET @s = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE promotion ADD COLUMN buckets INT NOT NULL DEFAULT 1',
  'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'promotion' AND column_name = 'buckets');
PREPARE add_promotion_buckets FROM @s;
EXECUTE add_promotion_buckets;
DEALLOCATE PREPARE add_promotion_buckets;

SET @s = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE grab_flow ADD COLUMN bucket INT NOT NULL DEFAULT 0, ADD COLUMN buckets INT NOT NULL DEFAULT 1',
  'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'grab_flow' AND column_name = 'bucket');
PREPARE add_flow_bucket FROM @s;
EXECUTE add_flow_bucket;
DEALLOCATE PREPARE add_flow_bucket;
