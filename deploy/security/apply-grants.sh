#!/bin/bash
# apply-grants.sh before|after [FILE]: prints the part of mysql-grants.sql (default:
# beside this script) above or below its @after-migrations line with the
# ${MYSQL_DATABASE} and ${MYSQL_*_PASSWORD} placeholders filled in from the
# environment, for root's mysql client to run:
#   bash apply-grants.sh before | mysql -uroot ...   # the migrator
#   recovery migrate                                  # as flashsale_migrate
#   bash apply-grants.sh after | mysql -uroot ...    # the services' users
# The passwords come from the environment (a Secret, compose's .env), never argv.
# A placeholder whose variable is unset or empty stops it: no user gets an empty password.
set -euo pipefail
part=${1:-}
file=${2:-$(dirname "$0")/mysql-grants.sql}
case "$part" in
before | after) ;;
*)
	echo >&2 "usage: apply-grants.sh before|after [mysql-grants.sql]"
	exit 2
	;;
esac
below=before
while IFS= read -r line || [ -n "$line" ]; do
	if [[ $line == "-- @after-migrations"* ]]; then
		below=after
		continue
	fi
	[[ $below == "$part" ]] || continue
	while [[ $line =~ \$\{(MYSQL_[A-Z_]+)\} ]]; do
		name=${BASH_REMATCH[1]}
		if [[ -z ${!name:-} ]]; then
			echo >&2 "apply-grants.sh: $name is not set"
			exit 1
		fi
		line=${line//"\${$name}"/"${!name}"}
	done
	printf '%s\n' "$line"
done <"$file"
