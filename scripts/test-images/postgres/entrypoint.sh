#!/bin/sh
# The official image's contract, reduced to what the tests use: on an empty data directory,
# create the cluster with POSTGRES_USER as its superuser (password POSTGRES_PASSWORD) and the
# database POSTGRES_DB, then run the server in the foreground as `postgres`, listening on every
# interface (the published port). A command other than `postgres ...` runs as given (debugging).
set -eu
if [ "${1:-}" != postgres ]; then exec "$@"; fi
shift
user=${POSTGRES_USER:-postgres}
password=${POSTGRES_PASSWORD:-postgres}
db=${POSTGRES_DB:-$user}
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
mkdir -p "$PGDATA" /var/run/postgresql
chown postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$password" > "$pwfile"
  chown postgres "$pwfile"
  # UTF8 as the official image (and the production server); C.UTF-8 is built into Debian's libc.
  as_postgres initdb --pgdata="$PGDATA" --username="$user" --pwfile="$pwfile" \
    --encoding=UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  # Clients come through the published port, from the bridge's gateway: password auth from anywhere.
  echo 'host all all all scram-sha-256' >> "$PGDATA/pg_hba.conf"
  if [ "$db" != postgres ]; then
    # Single-user mode: no server to start and stop just to create one database.
    printf 'create database "%s";\n' "$db" | as_postgres postgres --single -D "$PGDATA" -c exit_on_error=true postgres >/dev/null
  fi
  echo "entrypoint: cluster created (superuser $user, database $db)"
fi
# fsync off: a test database is thrown away with its container; durability only costs time here.
exec setpriv --reuid=postgres --regid=postgres --init-groups \
  postgres -D "$PGDATA" -c listen_addresses='*' -c fsync=off -c synchronous_commit=off -c full_page_writes=off "$@"
