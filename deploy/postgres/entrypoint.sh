#!/bin/sh
# Makes the cluster on first start (user POSTGRES_USER with the password in
# POSTGRES_PASSWORD_FILE, database POSTGRES_DB, password logins from the
# network), then runs postgres in the foreground with any extra arguments.
set -eu
user=${POSTGRES_USER:-reach}
db=${POSTGRES_DB:-reach}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  file=${POSTGRES_PASSWORD_FILE:?set POSTGRES_PASSWORD_FILE to a file holding the password}
  [ -s "$file" ] || { echo "reach-postgres: $file is empty or missing" >&2; exit 1; }
  initdb --username="$user" --pwfile="$file" --auth-local=peer \
    --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
  echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
  echo "CREATE DATABASE \"$db\" OWNER \"$user\";" |
    postgres --single -D "$PGDATA" -c listen_addresses= postgres >/dev/null
  echo "reach-postgres: made the cluster in $PGDATA (user $user, database $db)"
fi
exec postgres -c listen_addresses='*' -c unix_socket_directories=/run/postgresql "$@"
