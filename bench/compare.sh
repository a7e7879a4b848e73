#!/bin/sh
# bench/compare.sh OLD_BINARY NEW_BINARY [ROUNDS]: the headline figure of two builds
# side by side on this machine: req/s of a cached header GET of a published
# version (wrk, 5 s, 16 and 64 connections), the two servers measured in turn,
# ROUNDS times (default 3), so that a change of the machine's load hits both. Used
# to show that a change made nothing slower (e.g. a refactoring): build the old
# commit in a worktree (git worktree add /tmp/old COMMIT && make -C /tmp/old
# build/tensorgate) and pass both binaries. Prints each round and the medians.
# Timing never fails anything: the script fails only when a step cannot run.
set -eu
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
    echo "usage: $0 OLD_BINARY NEW_BINARY [ROUNDS]" >&2
    exit 2
fi
command -v wrk >/dev/null 2>&1 || { echo "bench/compare.sh: wrk missing (scripts/install-deps.sh --bench)" >&2; exit 2; }
rounds=${3:-3}
work=$(mktemp -d /tmp/tg-compare-XXXXXX)
pid=""
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

# A small valid safetensors file (one F32 tensor of 16 values).
/usr/bin/python3 - "$work/model.safetensors" <<'PY'
import json, struct, sys
h = json.dumps({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}}, separators=(",", ":")).encode()
h += b" " * ((8 - (8 + len(h)) % 8) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + bytes(64))
PY

# serve BINARY NAME: starts BINARY on a fresh data directory, publishes bench/m
# version 1 and sets url to its header route.
serve() {
    data=$work/$2
    "$1" serve --listen 127.0.0.1:0 --data "$data" 2>"$work/$2.log" &
    pid=$!
    port=""
    for _ in $(seq 1 200); do
        port=$(sed -n 's|.*listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/$2.log" | tail -n 1)
        [ -n "$port" ] && break
        sleep 0.05
    done
    [ -n "$port" ] || { echo "bench/compare.sh: $1 did not start" >&2; cat "$work/$2.log" >&2; exit 2; }
    token=$("$1" token create --data "$data" --scope write 2>/dev/null | tail -n 1)
    base=http://127.0.0.1:$port
    auth="Authorization: Bearer $token"
    curl -sf -o /dev/null -H "$auth" -H 'Content-Type: application/json' -d '{"name":"bench/m"}' "$base/v1/models"
    curl -sf -o /dev/null -H "$auth" -X POST "$base/v1/models/bench/m/versions"
    curl -sf -o /dev/null -H "$auth" -T "$work/model.safetensors" "$base/v1/models/bench/m/versions/1/files/model.safetensors"
    curl -sf -o /dev/null -H "$auth" -X POST "$base/v1/models/bench/m/versions/1/publish"
    url=$base/v1/models/bench/m/versions/1/files/model.safetensors/header
    curl -sf -o /dev/null "$url" || { echo "bench/compare.sh: $url does not answer" >&2; exit 2; }
}
stop() { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; pid=""; }
rps() { wrk -t2 -c"$1" -d5s "$url" | awk '/Requests\/sec/ { printf "%.0f", $2 }'; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

old16="" old64="" new16="" new64=""
echo "header GET req/s (published version), $(nproc) cores, $rounds rounds, old then new"
for r in $(seq 1 "$rounds"); do
    serve "$1" "old$r"; o16=$(rps 16); o64=$(rps 64); stop
    serve "$2" "new$r"; n16=$(rps 16); n64=$(rps 64); stop
    old16="$old16 $o16" old64="$old64 $o64" new16="$new16 $n16" new64="$new64 $n64"
    printf 'round %d: old %s / %s   new %s / %s   (16 / 64 connections)\n' "$r" "$o16" "$o64" "$n16" "$n64"
done
m_o16=$(echo "$old16" | median) m_o64=$(echo "$old64" | median)
m_n16=$(echo "$new16" | median) m_n64=$(echo "$new64" | median)
printf 'median: old %s / %s   new %s / %s   ratio new/old %s / %s\n' "$m_o16" "$m_o64" "$m_n16" "$m_n64" \
    "$(awk -v a="$m_n16" -v b="$m_o16" 'BEGIN { printf "%.2f", a / b }')" \
    "$(awk -v a="$m_n64" -v b="$m_o64" 'BEGIN { printf "%.2f", a / b }')"
