# tests/webhooks/lib.sh: what the webhook suites share, sourced after
# tests/import/lib.sh (servers, tally) with BIN, W, HERE, PY and SECRET set.
# The receiver's records are read with Python (lib.py), never with tensorgate.

# start_receiver [PORT]: receiver.py on PORT (default: a free one); sets RP, RECV.
start_receiver() {
    rm -f "$W/rport"
    $PY "$HERE/receiver.py" "$W/rport" "$W/received.jsonl" "$SECRET" ${1:-} &
    receiver_pid=$!
    pids="$pids $receiver_pid"
    for _ in $(seq 1 100); do
        [ -s "$W/rport" ] && break
        sleep 0.1
    done
    RP=$(cat "$W/rport")
    RECV="http://127.0.0.1:$RP"
}
stop_receiver() {
    kill "$receiver_pid" 2>/dev/null
    wait "$receiver_pid" 2>/dev/null
}
# start_server NAME ARGS...: start_tg, and the server's pid (server_pid NAME)
start_server() {
    start_tg "$@"
    eval "pid_$1=$!"
}
server_pid() { eval "echo \$pid_$1"; }
# req METHOD URL TOKEN [BODY]: prints the status; the body is in $W/body
req() {
    if [ -n "$3" ]; then
        set -- "$1" "$2" "$3" "${4:-}" -H "Authorization: Bearer $3"
    else
        set -- "$1" "$2" "$3" "${4:-}"
    fi
    m=$1
    u=$2
    b=$4
    shift 4
    if [ -n "$b" ]; then
        curl -s -o "$W/body" -w '%{http_code}' -X "$m" "$@" -H 'Content-Type: application/json' --data-binary "$b" "$u"
    else
        curl -s -o "$W/body" -w '%{http_code}' -X "$m" "$@" "$u"
    fi
}
not() { ! "$@"; }
jget() { $PY "$HERE/lib.py" get "$W/body" "$1"; }
jhas() { [ "$(jget "$1")" = "$2" ]; }
jhas_text() { jget "$1" | grep -q "$2"; }
jcount() { $PY "$HERE/lib.py" jcount "$W/body" "$1"; }
jq1() { $PY "$HERE/lib.py" jexpr "$W/body" "$1"; }
count() { $PY "$HERE/lib.py" count "$W/received.jsonl" "$1"; }
# wait_for NAME EXPR N: until len(EXPR) over the receiver's records >= N (60 s at most)
wait_for() {
    got=0
    for _ in $(seq 1 600); do
        got=$(count "$2")
        [ "$got" -ge "$3" ] && break
        sleep 0.1
    done
    check "$1 ($got of $3)" [ "$got" -ge "$3" ]
}
