#!/bin/sh
# tests/python/run.sh BINARY: the Python client (clients/python, package
# tensorgate) against real servers: one plain, one with --rate-limit (to see
# 429 + Retry-After retried), --auth-read (to see tokens refused) and
# --header-timeout 1 (to see an idle keep-alive connection closed by the server), each on a free loopback port with a fresh data
# directory in a temp dir, stopped at the end. The checks are in
# tests/python/test_client.py, run by Debian's /usr/bin/python3 (NumPy, torch).
# Ends with "N passed, N failed"; exits non-zero on a failure.
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
case $1 in
/*) BIN=$1 ;;
*) BIN=$(pwd)/$1 ;;
esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${TG_PYTHON:-/usr/bin/python3}
W=$(mktemp -d "${TMPDIR:-/tmp}/tg-python.XXXXXX")
pids=
cleanup() {
    for p in $pids; do
        kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    rm -rf "$W"
}
trap cleanup EXIT INT TERM

# start NAME ARGS...: a server on a free port; sets $port
start() {
    name=$1
    shift
    "$BIN" serve --listen 127.0.0.1:0 --data "$W/$name" "$@" >"$W/$name.out" 2>"$W/$name.log" &
    pids="$pids $!"
    port=
    for _ in $(seq 1 100); do
        port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$W/$name.log" | head -n 1)
        [ -n "$port" ] && return 0
        sleep 0.1
    done
    echo "FAIL: the server $name did not start"
    cat "$W/$name.log"
    echo "0 passed, 1 failed"
    exit 1
}

start plain
port_plain=$port
start limited --rate-limit 5 --rate-burst 2 --auth-read --header-timeout 1
port_limited=$port
token_plain=$("$BIN" token create --data "$W/plain" --scope write --namespace acme | tail -n 1)
token_limited=$("$BIN" token create --data "$W/limited" --scope write --namespace acme | tail -n 1)
if [ -z "$token_plain" ] || [ -z "$token_limited" ]; then
    echo "FAIL: token create"
    echo "0 passed, 1 failed"
    exit 1
fi

unset TENSORGATE_TOKEN
PYTHONPATH="$ROOT/clients/python" PYTHONDONTWRITEBYTECODE=1 "$PY" "$ROOT/tests/python/test_client.py" \
    "http://127.0.0.1:$port_plain" "$token_plain" "http://127.0.0.1:$port_limited" "$token_limited"
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "--- server logs (last lines)"
    tail -n 20 "$W/plain.log" "$W/limited.log"
fi
exit "$rc"
