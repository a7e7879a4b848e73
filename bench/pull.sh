#!/bin/sh
# bench/pull.sh BUILD_DIR: `tensorgate pull` throughput next to curl downloading the
# same files from the same server in the same run (curl, one process per file, all
# started at once, so both sides move the files in parallel).
#   PULL_FILES files of PULL_FILE_MB MiB each (default 8 x 256 MiB = 2 GiB; BENCH_QUICK=1:
#   4 x 16 MiB), pushed once with `tensorgate push`, then, 3 times each, median kept:
#     pull            (every SHA-256 checked; each file fsynced before its rename
#                      from .part, its folder fsynced at the end)
#     pull --no-fsync (every SHA-256 checked, no fsync)
#     curl            (no check, no fsync)
#     curl + sync     (no check; then `sync FILES DIR`: each file and the folder
#                      fsynced, the same durability as the pull's default)
#   and three figures: pull vs curl, pull --no-fsync vs curl, pull vs curl + sync.
#   Each side starts with an empty folder and no dirty pages of the one before
#   (an untimed sync between them).
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
else
    files=${PULL_FILES:-8}
    mb=${PULL_FILE_MB:-256}
fi
reps=3
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
# the median of the numbers given
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

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

# curl DIR: every file at once into DIR
curl_all() {
    pids=""
    for f in "$work"/src/*.safetensors; do
        name=$(basename "$f")
        curl -sf -o "$1/$name" "$TENSORGATE_URL/v1/models/bench/pull/versions/latest/files/$name" &
        pids="$pids $!"
    done
    for p in $pids; do wait "$p"; done
}
# fresh DIR: an empty folder, and no dirty pages of the side before
fresh() {
    rm -rf "$work/pull" "$work/nofsync" "$work/curl" "$work/curlsync"
    mkdir -p "$1"
    sync
}

t_pull=
t_nofsync=
t_curl=
t_curlsync=
i=0
while [ "$i" -lt "$reps" ]; do
    fresh "$work"
    t0=$(now)
    "$bin" pull bench/pull "$work/pull" --parallel "$files" >/dev/null 2>&1
    t1=$(now)
    t_pull="$t_pull $(elapsed "$t0" "$t1")"
    for f in "$work"/src/*.safetensors; do
        cmp -s "$f" "$work/pull/$(basename "$f")" || {
            echo "bench/pull.sh: pulled $(basename "$f") differs" >&2
            exit 2
        }
    done
    fresh "$work"
    t0=$(now)
    "$bin" pull bench/pull "$work/nofsync" --parallel "$files" --no-fsync >/dev/null 2>&1
    t1=$(now)
    t_nofsync="$t_nofsync $(elapsed "$t0" "$t1")"
    [ -z "$(find "$work/nofsync" -name '*.part')" ] || {
        echo "bench/pull.sh: pull --no-fsync left a part file" >&2
        exit 2
    }
    fresh "$work/curl"
    t0=$(now)
    curl_all "$work/curl"
    t1=$(now)
    t_curl="$t_curl $(elapsed "$t0" "$t1")"
    fresh "$work/curlsync"
    t0=$(now)
    curl_all "$work/curlsync"
    sync "$work"/curlsync/*.safetensors "$work/curlsync"
    t1=$(now)
    t_curlsync="$t_curlsync $(elapsed "$t0" "$t1")"
    i=$((i + 1))
done
# shellcheck disable=SC2086 # the lists split into their numbers
{
    m_pull=$(median $t_pull)
    m_nofsync=$(median $t_nofsync)
    m_curl=$(median $t_curl)
    m_curlsync=$(median $t_curlsync)
}

# figure NAME SECONDS ANCHOR ANCHOR_SECONDS: one line, one result
figure() {
    printf '%-46s %8s %-5s  anchor %-24s %8s %-5s  ratio %s\n' \
        "$1" "$(rate "$total" "$2")" "GB/s" "$3" "$(rate "$total" "$4")" "GB/s" "$(ratio "$4" "$2")"
    bench_result "$1" "$(rate "$total" "$2")" GB/s "$3" "$(rate "$total" "$4")" "$(ratio "$4" "$2")"
}
figure "pull $files x $mb MiB (SHA-256, fsync)" "$m_pull" "curl, $files at once" "$m_curl"
figure "pull $files x $mb MiB --no-fsync (SHA-256)" "$m_nofsync" "curl, $files at once" "$m_curl"
figure "pull $files x $mb MiB (SHA-256, fsync)" "$m_pull" "curl + sync, $files at once" "$m_curlsync"
