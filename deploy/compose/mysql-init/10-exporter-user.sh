# Sourced by the mysql image's entrypoint on the first start of an empty data volume
# (/docker-entrypoint-initdb.d), after the root password and the flashsale user are set.
# Creates mysqld_exporter's own user: it reads server status, replication state and
# performance_schema, and no table of the record. The password comes from the file
# $MYSQL_EXPORTER_PASSWORD_FILE names (compose: secret mysql-exporter-password;
# Kubernetes: key mysql-exporter-password of flashsale-secrets); use hex or base64
# passwords (no quote characters). An existing volume: run the same statements by hand
# (deploy/RUNBOOK.md, "Exporter credentials").
if [ -z "${MYSQL_EXPORTER_PASSWORD_FILE:-}" ] || [ ! -s "$MYSQL_EXPORTER_PASSWORD_FILE" ]; then
	echo >&2 "10-exporter-user.sh: MYSQL_EXPORTER_PASSWORD_FILE names no readable file; the exporter has no user"
	exit 1
fi
exporter_password="$(cat "$MYSQL_EXPORTER_PASSWORD_FILE")"
docker_process_sql --database=mysql <<EOSQL
CREATE USER IF NOT EXISTS 'exporter'@'%' IDENTIFIED BY '${exporter_password}' WITH MAX_USER_CONNECTIONS 3;
GRANT PROCESS, REPLICATION CLIENT ON *.* TO 'exporter'@'%';
GRANT SELECT ON performance_schema.* TO 'exporter'@'%';
EOSQL
unset exporter_password
