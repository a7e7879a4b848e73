# tests/import/lib.sh: what the import suites share (sourced by run.sh and
# pg-replicas.sh after they set BIN and W): the servers they start and stop, the
# pass/fail tally, free ports. start_tg NAME ARGS... starts `tensorgate serve` on
# a fresh data directory W/NAME with ARGS and sets port; every server started is
# stopped, and W removed, when the suite exits.
pids=
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    for p in $pids; do wait "$p" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT INT TERM
passed=0
failed=0
ok() { passed=$((passed + 1)); }
ko() {
    failed=$((failed + 1))
    echo "FAIL: $*"
}
check() { # NAME COMMAND...
    name=$1
    shift
    if "$@"; then ok; else ko "$name"; fi
}
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_port() { # PORT
    for _ in $(seq 1 100); do
        curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0
        sleep 0.1
    done
    return 1
}
start_tg() { # NAME ARGS... ; sets port
    n=$1
    shift
    "$BIN" serve --listen 127.0.0.1:0 --data "$W/$n" "$@" >"$W/$n.out" 2>"$W/$n.log" &
    pids="$pids $!"
    port=
    for _ in $(seq 1 100); do
        port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$W/$n.log" | head -n 1)
        [ -n "$port" ] && return 0
        sleep 0.1
    done
    echo "FAIL: server $n did not start"
    cat "$W/$n.log"
    exit 1
}
