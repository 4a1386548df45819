-- The MySQL users of the record, one per service, each with the statements it
-- runs on the tables it uses and nothing else. Applied by root once the database
-- exists (deploy/security/README.md): a shell fills in ${MYSQL_DATABASE} and the
-- ${MYSQL_*_PASSWORD} placeholders (hex or base64 passwords: no quote characters).
-- Re-running it is harmless; it never takes a privilege away (README: narrowing).
--
-- flashsale_migrate   the schema: internal/store's migrations (DDL, schema_migrations)
-- flashsale_grab      grab-service: the degrade path's flow writes, the reconciler's
--                     reads of the record, the promotion keys of the fence
-- flashsale_admin     promo-admin: promotions, their audit trail and envelope splits;
--                     the switch history (a change's outcome is all it updates); the
--                     flow log, archived rows included, for a promotion's timeline
-- flashsale_sink      recovery sink (with --heal): the flow log, holds, owed CANCELs,
--                     dead letters, and the rebuild's reads
-- flashsale_recovery  recovery rebuild and verify: the rebuild's reads, and the owed
--                     CANCELs it settles into the flow log; recovery archive: the rows
--                     of promotions ended long ago moved to grab_flow_archive, their
--                     promotions marked archived_at, settled holds deleted
-- Every service reads schema_migrations: store.Connect refuses a schema behind the
-- binary. No user but the migrator may CREATE, ALTER, DROP or INDEX; none holds GRANT
-- OPTION. GET_LOCK (the migration lock, the healer's) needs no privilege.
-- internal/privilege's tests run each service's store calls as its user against a
-- real server; change them together.

CREATE USER IF NOT EXISTS 'flashsale_migrate'@'%' IDENTIFIED BY '${MYSQL_MIGRATE_PASSWORD}';
GRANT CREATE, ALTER, INDEX, SELECT, INSERT ON `${MYSQL_DATABASE}`.* TO 'flashsale_migrate'@'%';

-- @after-migrations: the grants below name tables, which must exist first.

CREATE USER IF NOT EXISTS 'flashsale_grab'@'%' IDENTIFIED BY '${MYSQL_GRAB_PASSWORD}';
GRANT SELECT ON `${MYSQL_DATABASE}`.`schema_migrations` TO 'flashsale_grab'@'%';
GRANT SELECT, INSERT ON `${MYSQL_DATABASE}`.`grab_flow` TO 'flashsale_grab'@'%';
GRANT SELECT, INSERT, DELETE ON `${MYSQL_DATABASE}`.`grab_flow_early` TO 'flashsale_grab'@'%';
GRANT SELECT, INSERT, UPDATE ON `${MYSQL_DATABASE}`.`grab_hold` TO 'flashsale_grab'@'%';
GRANT SELECT, INSERT ON `${MYSQL_DATABASE}`.`owed_cancel` TO 'flashsale_grab'@'%';
GRANT SELECT, UPDATE (`remaining`) ON `${MYSQL_DATABASE}`.`promotion` TO 'flashsale_grab'@'%';
GRANT SELECT ON `${MYSQL_DATABASE}`.`promotion_envelope` TO 'flashsale_grab'@'%';

CREATE USER IF NOT EXISTS 'flashsale_admin'@'%' IDENTIFIED BY '${MYSQL_ADMIN_PASSWORD}';
GRANT SELECT ON `${MYSQL_DATABASE}`.`schema_migrations` TO 'flashsale_admin'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE ON `${MYSQL_DATABASE}`.`promotion` TO 'flashsale_admin'@'%';
GRANT SELECT, INSERT ON `${MYSQL_DATABASE}`.`promotion_audit` TO 'flashsale_admin'@'%';
GRANT SELECT, INSERT, DELETE ON `${MYSQL_DATABASE}`.`promotion_envelope` TO 'flashsale_admin'@'%';
GRANT SELECT ON `${MYSQL_DATABASE}`.`grab_flow` TO 'flashsale_admin'@'%';
GRANT SELECT ON `${MYSQL_DATABASE}`.`grab_flow_archive` TO 'flashsale_admin'@'%';
GRANT SELECT, INSERT, UPDATE (`outcome`) ON `${MYSQL_DATABASE}`.`switch_history` TO 'flashsale_admin'@'%';
GRANT SELECT, INSERT, UPDATE (`status`, `decided_by`, `decided_role`, `decided_at`, `reason`) ON `${MYSQL_DATABASE}`.`proposals` TO 'flashsale_admin'@'%';

CREATE USER IF NOT EXISTS 'flashsale_sink'@'%' IDENTIFIED BY '${MYSQL_SINK_PASSWORD}';
GRANT SELECT ON `${MYSQL_DATABASE}`.`schema_migrations` TO 'flashsale_sink'@'%';
GRANT SELECT, INSERT ON `${MYSQL_DATABASE}`.`grab_flow` TO 'flashsale_sink'@'%';
GRANT SELECT, INSERT, DELETE ON `${MYSQL_DATABASE}`.`grab_flow_early` TO 'flashsale_sink'@'%';
GRANT SELECT, INSERT, UPDATE ON `${MYSQL_DATABASE}`.`grab_hold` TO 'flashsale_sink'@'%';
GRANT SELECT, DELETE ON `${MYSQL_DATABASE}`.`owed_cancel` TO 'flashsale_sink'@'%';
GRANT SELECT, INSERT ON `${MYSQL_DATABASE}`.`flow_dead_letter` TO 'flashsale_sink'@'%';
GRANT SELECT, UPDATE (`remaining`) ON `${MYSQL_DATABASE}`.`promotion` TO 'flashsale_sink'@'%';
GRANT SELECT ON `${MYSQL_DATABASE}`.`promotion_envelope` TO 'flashsale_sink'@'%';

CREATE USER IF NOT EXISTS 'flashsale_recovery'@'%' IDENTIFIED BY '${MYSQL_RECOVERY_PASSWORD}';
GRANT SELECT ON `${MYSQL_DATABASE}`.`schema_migrations` TO 'flashsale_recovery'@'%';
GRANT SELECT, INSERT, DELETE ON `${MYSQL_DATABASE}`.`grab_flow` TO 'flashsale_recovery'@'%';
GRANT SELECT, INSERT ON `${MYSQL_DATABASE}`.`grab_flow_archive` TO 'flashsale_recovery'@'%';
GRANT SELECT, INSERT, DELETE ON `${MYSQL_DATABASE}`.`grab_flow_early` TO 'flashsale_recovery'@'%';
GRANT SELECT, INSERT, UPDATE, DELETE ON `${MYSQL_DATABASE}`.`grab_hold` TO 'flashsale_recovery'@'%';
GRANT SELECT, DELETE ON `${MYSQL_DATABASE}`.`owed_cancel` TO 'flashsale_recovery'@'%';
GRANT SELECT ON `${MYSQL_DATABASE}`.`flow_dead_letter` TO 'flashsale_recovery'@'%';
GRANT SELECT, UPDATE (`remaining`, `archived_at`) ON `${MYSQL_DATABASE}`.`promotion` TO 'flashsale_recovery'@'%';
GRANT SELECT ON `${MYSQL_DATABASE}`.`promotion_envelope` TO 'flashsale_recovery'@'%';
