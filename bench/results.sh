# bench/results.sh: sourced by every bench script. bench_result NAME VALUE UNIT
# ANCHOR ANCHOR_VALUE [RATIO] appends one figure as a JSON line to the file
# $BENCH_RESULTS names (bench/run.sh sets it and turns the lines into
# build/bench/results.json at the end); nothing happens when it is unset.
# A VALUE or ANCHOR_VALUE "best/median" keeps the best; a RATIO "1.2x" loses the x;
# a figure that is not a number becomes null (bc's ".38" is a number).
bench_result() {
    [ -n "${BENCH_RESULTS:-}" ] || return 0
    awk -v n="$1" -v v="$2" -v u="$3" -v a="$4" -v av="$5" -v r="${6:-}" '
        function esc(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); gsub(/\t/, " ", s); return "\"" s "\"" }
        function num(s) { sub(/\/.*/, "", s); sub(/x$/, "", s)
            return (s ~ /^-?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$/) ? s + 0 : "null" }
        BEGIN {
            ratio = num(r)
            if (ratio == "null" && num(v) != "null" && num(av) != "null" && num(av) != 0)
                ratio = sprintf("%.4g", num(v) / num(av))
            printf "{\"name\":%s,\"value\":%s,\"unit\":%s,\"anchor\":%s,\"anchor_value\":%s,\"ratio\":%s}\n",
                esc(n), num(v), esc(u), esc(a), num(av), ratio
        }' >>"$BENCH_RESULTS"
}

# bench_server_port NAME LOG PID: waits (up to 15 s) for the server PID to log its
# listening address in LOG and prints the port; when it does not start (it exited,
# or the wait ran out) prints the log on stderr and exits the calling script with 2.
bench_server_port() {
    _i=0
    _port=""
    while [ $_i -lt 300 ]; do
        _port=$(sed -n 's|.*tensorgate: listening on http://[^:]*:\([0-9]*\).*|\1|p' "$2" | tail -n 1)
        [ -n "$_port" ] && break
        kill -0 "$3" 2>/dev/null || break
        sleep 0.05
        _i=$((_i + 1))
    done
    if [ -z "$_port" ]; then
        echo "bench/$1: the server did not start:" >&2
        cat "$2" >&2
        exit 2
    fi
    echo "$_port"
}
