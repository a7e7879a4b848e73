#!/bin/sh
# bench/pull.sh BUILD_DIR: `tensorgate pull` throughput next to curl downloading the
# same files from the same server in the same run (anchor: curl, one process per
# file, all started at once, so both sides move the files in parallel).
#   PULL_FILES files of PULL_FILE_MB MiB each (default 8 x 256 MiB = 2 GiB; BENCH_QUICK=1:
#   4 x 16 MiB), pushed once with `tensorgate push`, then pulled `reps` times into an empty
#   directory (pull checks every SHA-256 and renames from .part) and fetched as many
#   times with curl into another (no check). Best of the repetitions on each side.
#   The pull runs twice a repetition: as it is (the SHA-256s on the batch's hasher
#   thread beside the transfers) and with TENSORGATE_HASH_INLINE=1 (hashed in the
#   transfer loop), both against the same curl anchor.
# Timing never fails anything: the script fails only when a step cannot run.
set -eu
cd "$(dirname "$0")/.."
. bench/results.sh
build=${1:-build}
bin=$(pwd)/$build/tensorgate
py=/usr/bin/python3

if [ "${BENCH_QUICK:-0}" = 1 ]; then
    files=${PULL_FILES:-4}
    mb=${PULL_FILE_MB:-16}
    reps=2
else
    files=${PULL_FILES:-8}
    mb=${PULL_FILE_MB:-256}
    reps=3
fi
command -v curl >/dev/null 2>&1 || {
    echo "bench/pull.sh: curl missing" >&2
    exit 2
}

work=$(mktemp -d /tmp/tg-bench-pull-XXXXXX)
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }
rate() { awk -v b="$1" -v s="$2" 'BEGIN { if (s <= 0) s = 1e-9; printf "%.2f", b / s / 1e9 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b <= 0) { print "n/a"; exit } printf "%.3gx", a / b }'; }
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b < a) ? b : a }'; }

"$bin" serve --listen 127.0.0.1:0 --data "$work/data" >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
port=
for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$work/server.log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || {
    echo "bench/pull.sh: the server did not start" >&2
    cat "$work/server.log" >&2
    exit 2
}
export TENSORGATE_URL="http://127.0.0.1:$port"
TENSORGATE_TOKEN=$("$bin" token create --data "$work/data" --scope write 2>/dev/null | tail -n 1)
export TENSORGATE_TOKEN

# the files: valid safetensors of random bytes as U8 (incompressible, written for real)
mkdir -p "$work/src"
"$py" - "$work/src" "$files" "$mb" <<'EOF'
import json, os, struct, sys
d, n, mb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    data = mb << 20
    h = json.dumps({"t%d" % i: {"dtype": "U8", "shape": [data], "data_offsets": [0, data]}}).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(d, "shard-%02d.safetensors" % i), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        left = data
        while left:
            k = min(left, 16 << 20)
            f.write(os.urandom(k))
            left -= k
EOF
"$bin" push "$work/src" bench/pull --publish >/dev/null 2>&1
total=$((files * mb * 1024 * 1024))

best_pull=
best_inline=
best_curl=
i=0
while [ "$i" -lt "$reps" ]; do
    rm -rf "$work/pull" "$work/curl"
    mkdir -p "$work/curl"
    sync
    t0=$(now)
    "$bin" pull bench/pull "$work/pull" --parallel "$files" >/dev/null 2>&1
    t1=$(now)
    best_pull=$(min "$best_pull" "$(elapsed "$t0" "$t1")")
    rm -rf "$work/pull"
    sync
    t0=$(now)
    TENSORGATE_HASH_INLINE=1 "$bin" pull bench/pull "$work/pull" --parallel "$files" >/dev/null 2>&1
    t1=$(now)
    best_inline=$(min "$best_inline" "$(elapsed "$t0" "$t1")")
    t0=$(now)
    pids=""
    for f in "$work"/src/*.safetensors; do
        name=$(basename "$f")
        curl -sf -o "$work/curl/$name" "$TENSORGATE_URL/v1/models/bench/pull/versions/latest/files/$name" &
        pids="$pids $!"
    done
    for p in $pids; do wait "$p"; done
    t1=$(now)
    best_curl=$(min "$best_curl" "$(elapsed "$t0" "$t1")")
    i=$((i + 1))
done
for f in "$work"/src/*.safetensors; do
    cmp -s "$f" "$work/pull/$(basename "$f")" || {
        echo "bench/pull.sh: pulled $(basename "$f") differs" >&2
        exit 2
    }
done

printf '%-44s %10s %-6s  anchor %-30s %10s %-6s  ratio %s\n' \
    "pull $files x $mb MiB (SHA-256 checked)" "$(rate "$total" "$best_pull")" "GB/s" \
    "curl, $files at once" "$(rate "$total" "$best_curl")" "GB/s" \
    "$(ratio "$best_curl" "$best_pull")"
bench_result "pull $files x $mb MiB (SHA-256 checked)" "$(rate "$total" "$best_pull")" GB/s \
    "curl, $files at once" "$(rate "$total" "$best_curl")" "$(ratio "$best_curl" "$best_pull")"
printf '%-44s %10s %-6s  anchor %-30s %10s %-6s  ratio %s\n' \
    "pull $files x $mb MiB (SHA-256 inline)" "$(rate "$total" "$best_inline")" "GB/s" \
    "curl, $files at once" "$(rate "$total" "$best_curl")" "GB/s" \
    "$(ratio "$best_curl" "$best_inline")"
bench_result "pull $files x $mb MiB (SHA-256 inline)" "$(rate "$total" "$best_inline")" GB/s \
    "curl, $files at once" "$(rate "$total" "$best_curl")" "$(ratio "$best_curl" "$best_inline")"
