#!/bin/sh
# with-postgres.sh CMD [ARGS...]: runs CMD against a throwaway PostgreSQL 15
# cluster and removes the cluster afterwards.
#
# The cluster lives in a new temporary directory (initdb, then pg_ctl), listens
# on 127.0.0.1 on a free port (and a Unix socket in that directory), with
# fsync off (it is thrown away). CMD runs with:
#   TENSORGATE_TEST_PG  postgresql://tg@127.0.0.1:PORT/tensorgate (trust auth)
#   TG_PG_STOP          a shell command that stops this cluster (pg_ctl -m fast)
#   TG_PG_START         a shell command that starts it again (same port, same data)
#   TG_PG_DIR, TG_PG_PORT, TG_PG_BIN  the directory, the port, the server binaries
# The cluster is stopped and the directory removed when CMD ends, fails or the
# script gets a signal; the exit status is CMD's (or 2 when the cluster did not
# start). Tests run as root and initdb refuses root: as root the server runs as
# the Debian `postgres` user (runuser), which owns the temporary directory.
# PG_BIN overrides the binaries' directory (default /usr/lib/postgresql/15/bin).
set -u

if [ $# -eq 0 ]; then
    echo "usage: $0 CMD [ARGS...]" >&2
    exit 2
fi

bin=${PG_BIN:-/usr/lib/postgresql/15/bin}
if [ ! -x "$bin/initdb" ] || [ ! -x "$bin/pg_ctl" ]; then
    echo "with-postgres.sh: no PostgreSQL 15 server binaries in $bin (scripts/install-deps.sh installs postgresql-15)" >&2
    exit 2
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/tg-pg.XXXXXX") || exit 2
chmod 0755 "$dir"
as_pg=""
if [ "$(id -u)" -eq 0 ]; then
    if ! id postgres >/dev/null 2>&1; then
        echo "with-postgres.sh: running as root needs the postgres user (Debian's postgresql-15 creates it)" >&2
        rm -rf "$dir"
        exit 2
    fi
    chown postgres: "$dir"
    as_pg="runuser -u postgres --"
fi

child=""
started=""
cleanup() {
    if [ -n "$child" ]; then
        kill "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    if [ -n "$started" ] || [ -f "$dir/data/postmaster.pid" ]; then
        (cd "$dir" && $as_pg "$bin/pg_ctl" -D "$dir/data" -m immediate -w -t 10 stop) >/dev/null 2>&1
    fi
    rm -rf "$dir"
}
trap 'cleanup' EXIT
trap 'cleanup; trap - EXIT; exit 130' INT
trap 'cleanup; trap - EXIT; exit 143' TERM
trap 'cleanup; trap - EXIT; exit 129' HUP

fail() {
    echo "with-postgres.sh: $*" >&2
    [ -f "$dir/server.log" ] && tail -n 20 "$dir/server.log" >&2
    exit 2
}

if ! (cd "$dir" && $as_pg "$bin/initdb" -D "$dir/data" -U tg -A trust -E UTF8 --locale=C \
    --no-sync --no-instructions) >"$dir/initdb.log" 2>&1; then
    cat "$dir/initdb.log" >&2
    fail "initdb failed"
fi

# A free port: try a few random ones (the server fails to start on a taken one),
# below the ephemeral range: while the server is stopped (TG_PG_STOP), clients
# that keep connecting to its port could otherwise be given that very port as
# their own source port (a loopback self-connect) and keep it from starting again.
low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
[ "$low" -gt 12000 ] 2>/dev/null || low=32768
port=""
tries=0
while [ $tries -lt 8 ]; do
    tries=$((tries + 1))
    candidate=$(( ($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % (low - 11000)) + 10000 ))
    # skip ports something already listens on
    hex=$(printf '%04X' "$candidate")
    if grep -q ":$hex " /proc/net/tcp /proc/net/tcp6 2>/dev/null; then
        continue
    fi
    cat >"$dir/data/postgresql.auto.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $candidate
unix_socket_directories = '$dir'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 200
log_min_messages = warning
CONF
    if (cd "$dir" && $as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 20 start) \
        >/dev/null 2>&1; then
        port=$candidate
        started=1
        break
    fi
done
[ -n "$port" ] || fail "the server did not start"

if ! (cd "$dir" && $as_pg "$bin/psql" -X -q -h 127.0.0.1 -p "$port" -U tg -d postgres \
    -c "CREATE DATABASE tensorgate") >/dev/null 2>"$dir/createdb.log"; then
    cat "$dir/createdb.log" >&2
    fail "cannot create the database"
fi

TENSORGATE_TEST_PG="postgresql://tg@127.0.0.1:$port/tensorgate"
TG_PG_DIR=$dir
TG_PG_PORT=$port
TG_PG_BIN=$bin
TG_PG_STOP="cd '$dir' && $as_pg '$bin/pg_ctl' -D '$dir/data' -m fast -w -t 20 stop >/dev/null"
TG_PG_START="cd '$dir' && $as_pg '$bin/pg_ctl' -D '$dir/data' -l '$dir/server.log' -w -t 20 start >/dev/null"
export TENSORGATE_TEST_PG TG_PG_STOP TG_PG_START TG_PG_DIR TG_PG_PORT TG_PG_BIN

# CMD in the background so a signal to this script cleans up at once.
"$@" &
child=$!
wait "$child"
rc=$?
child=""
exit $rc
