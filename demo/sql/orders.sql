-- Orders demo tables (DESIGN.md section 8). StarRocks 3.x/4.x syntax; also accepted by the
-- project's StarRocks emulator. Idempotent: every statement is IF NOT EXISTS.
--
-- Primary-key tables: an UPSERT replaces the row with the same key, a DELETE (__op = 1)
-- removes it, which is what CDC after-images and key-only deletes need. Key columns come
-- first (StarRocks requires it) and are the bucketing columns. Bucket count is left to
-- StarRocks (automatic bucketing, 2.5.7+). replication_num 1 suits a single-BE demo cluster.
--
-- Invariants the generator keeps and the verifier checks: orders.item_count = number of its
-- items, orders.total_amount = sum(order_items.amount), amount = quantity * price, every
-- item's version = its order's version, no item without its order.

CREATE DATABASE IF NOT EXISTS `demo`;

CREATE TABLE IF NOT EXISTS `demo`.`orders` (
    `order_id`      BIGINT        NOT NULL,
    `customer_id`   BIGINT        NOT NULL,
    `item_count`    INT           NOT NULL,
    `total_amount`  DECIMAL(12,2) NOT NULL,
    `version`       BIGINT        NOT NULL,
    `order_status`  VARCHAR(32)   NULL,
    `updated_ts_ms` BIGINT        NULL
)
PRIMARY KEY (`order_id`)
DISTRIBUTED BY HASH(`order_id`)
PROPERTIES ("replication_num" = "1");

CREATE TABLE IF NOT EXISTS `demo`.`order_items` (
    `item_id`       BIGINT        NOT NULL,
    `order_id`      BIGINT        NOT NULL,
    `product_name`  VARCHAR(128)  NULL,
    `quantity`      INT           NOT NULL,
    `price`         DECIMAL(10,2) NOT NULL,
    `amount`        DECIMAL(12,2) NOT NULL,
    `version`       BIGINT        NOT NULL
)
PRIMARY KEY (`item_id`)
DISTRIBUTED BY HASH(`item_id`)
PROPERTIES ("replication_num" = "1");
