-- 0007_envelope_pools: envelope pools (docs/CONTRACT.md, "Envelope pools").
--   promotion.envelope_amount, .envelope_min  the pool's budget and least envelope,
--                          NULL for a promotion that is no pool; fixed at create
--   promotion_envelope     the pool's split, one row per envelope, written with the
--                          promotion row: idx is the order they are handed out in
--   grab_flow.amount       the sum of the envelopes a GRAB took (a CANCEL gave
--                          back); NULL for an item of no pool. For finance.
--   grab_flow.parts        those envelopes' idx, comma-separated, in the order taken
--
-- Guarded like 0002: each ALTER is prepared only when its column is missing.

SET @s = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE promotion ADD COLUMN envelope_amount BIGINT NULL, ADD COLUMN envelope_min BIGINT NULL',
  'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'promotion' AND column_name = 'envelope_amount');
PREPARE add_promotion_envelope FROM @s;
EXECUTE add_promotion_envelope;
DEALLOCATE PREPARE add_promotion_envelope;

SET @s = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE grab_flow ADD COLUMN amount BIGINT NULL, ADD COLUMN parts TEXT NULL',
  'DO 0')
  FROM information_schema.columns
  WHERE table_schema = DATABASE() AND table_name = 'grab_flow' AND column_name = 'amount');
PREPARE add_flow_amount FROM @s;
EXECUTE add_flow_amount;
DEALLOCATE PREPARE add_flow_amount;

CREATE TABLE IF NOT EXISTS promotion_envelope (
  promo_id   VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  promo_type INT NOT NULL,
  idx        INT NOT NULL,
  amount     BIGINT NOT NULL,
  PRIMARY KEY (promo_id, promo_type, idx)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;
