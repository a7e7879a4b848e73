#!/bin/sh
# bench/ingest.sh BUILD_DIR: upload ingest alone (issue 25, goal 4). Each round
# hashes the file with `openssl dgst -sha256` and then PUTs it with curl, back to
# back, so each ratio compares neighbours measured under the same load; the figure
# is the median ratio over the rounds (and the median rates). It also reports the
# server's CPU seconds per GiB ingested (utime+stime of the server process over the
# PUT), steadier than the wall time on a shared machine.
# TG_INGEST_BASE=PATH/tensorgate: a second server running that binary gets the same
# PUT in each round (the order alternates), for a before/after pair in one run.
# BENCH_QUICK=1: 256 MiB, 3 rounds. Default: 2 GiB, 5 rounds (TG_INGEST_ROUNDS).
# Timing never fails anything: the script fails only when a step cannot run.
set -eu
cd "$(dirname "$0")/.."
. bench/results.sh
build=${1:-build}
bin=$build/tensorgate
py=/usr/bin/python3
if [ "${BENCH_QUICK:-0}" = 1 ]; then
    bytes=$((256 * 1024 * 1024))
    rounds=${TG_INGEST_ROUNDS:-3}
else
    bytes=$((2 * 1024 * 1024 * 1024))
    rounds=${TG_INGEST_ROUNDS:-5}
fi
for tool in curl openssl; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "bench/ingest.sh: $tool missing" >&2
        exit 2
    }
done

work=$(mktemp -d /tmp/tg-bench-ingest-XXXXXX)
server_pids=""
cleanup() {
    for p in $server_pids; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

now() { date +%s.%N; }
rate() { awk -v b="$1" -v a="$2" -v c="$3" 'BEGIN { s = c - a; if (s <= 0) s = 1e-9; printf "%.3f", b / s / 1e9 }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# a valid safetensors file of exactly $bytes: one F32 tensor of varied finite values
"$py" - "$work/model.safetensors" "$bytes" <<'PY'
import json, struct, sys
path, total = sys.argv[1], int(sys.argv[2])
def header(n):
    h = json.dumps({"w": {"dtype": "F32", "shape": [n // 4], "data_offsets": [0, n]}}, separators=(",", ":")).encode()
    return h + b" " * ((8 - (8 + len(h)) % 8) % 8)
n = total - 8 - len(header(total))
n -= n % 4
h = header(n)
while 8 + len(h) + n != total:
    n = total - 8 - len(h)
    n -= n % 4
    h = header(n)
    assert 8 + len(h) + n <= total
block = b"".join(struct.pack("<f", float(i % 1000) / 7.0) for i in range(1 << 18))
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    left = n
    while left:
        k = min(left, len(block))
        f.write(block[:k])
        left -= k
PY
src=$work/model.safetensors
[ "$(stat -c %s "$src")" = "$bytes" ] || { echo "bench/ingest.sh: bad file size" >&2; exit 2; }
cat "$src" >/dev/null

pid_new="" pid_old="" pid="" # set through eval by start_server and put
# start_server BIN NAME: a server on its own data directory; sets pid_NAME and base_NAME,
# and a model bench/ingest with version 1 on it (token_NAME)
start_server() {
    log=$work/$2.log
    "$1" serve --listen 127.0.0.1:0 --data "$work/$2" --max-body $((16 * 1024 * 1024 * 1024)) 2>"$log" &
    eval "pid_$2=$!"
    port=""
    i=0
    while [ $i -lt 300 ]; do
        port=$(sed -n 's|.*tensorgate: listening on http://[^:]*:\([0-9]*\).*|\1|p' "$log" | tail -n 1)
        [ -n "$port" ] && break
        sleep 0.05
        i=$((i + 1))
    done
    [ -n "$port" ] || { echo "bench/ingest.sh: the server did not start:" >&2; cat "$log" >&2; exit 2; }
    base=http://127.0.0.1:$port
    token=$("$1" token create --data "$work/$2" --scope write 2>/dev/null | tail -n 1)
    eval "base_$2=\$base; token_$2=\$token"
    must 201 api POST /v1/models -H 'Content-Type: application/json' --data '{"name":"bench/ingest"}'
    must 201 api POST /v1/models/bench/ingest/versions
}
api() {
    m=$1
    p=$2
    shift 2
    curl -sS -o "$work/resp" -w '%{http_code}' -X "$m" -H "Authorization: Bearer $token" -H 'Expect:' "$@" "$base$p"
}
must() {
    want=$1
    shift
    got=$("$@")
    [ "$got" = "$want" ] || { echo "bench/ingest.sh: $* -> $got: $(head -c 300 "$work/resp")" >&2; exit 2; }
}
start_server "$bin" new
server_pids=$pid_new
other=${TG_INGEST_BASE:-}
if [ -n "$other" ]; then
    start_server "$other" old
    server_pids="$server_pids $pid_old"
fi
files=/v1/models/bench/ingest/versions/1/files
expect_sha=$(openssl dgst -sha256 "$src" | sed 's/.*= //')
hz=$(getconf CLK_TCK)

# put NAME ROUND: one PUT to server NAME; appends its rate, ratio to this round's
# openssl and CPU s/GiB to $work/NAME.{puts,ratios,cpu}
put() {
    eval "base=\$base_$1; token=\$token_$1; pid=\$pid_$1"
    c0=$(cpu_ticks "$pid")
    t1=$(now)
    must 201 api PUT "$files/up-$2.safetensors" -T "$src"
    t2=$(now)
    c1=$(cpu_ticks "$pid")
    grep -q "$expect_sha" "$work/resp" || { echo "bench/ingest.sh: the stored digest is not openssl's: $(head -c 400 "$work/resp")" >&2; exit 2; }
    g=$(rate "$bytes" "$t1" "$t2")
    echo "$g" >>"$work/$1.puts"
    awk -v p="$g" -v s="$sha" 'BEGIN { printf "%.4f\n", p / s }' >>"$work/$1.ratios"
    awk -v a="$c0" -v b="$c1" -v hz="$hz" -v n="$bytes" 'BEGIN { printf "%.3f\n", (b - a) / hz / (n / 2^30) }' >>"$work/$1.cpu"
    rm -f "$work/$1/blobs/sha256/"*/* # each PUT stores the same blob: start from none
    printf ', %s PUT %s GB/s (%s, %s CPU s/GiB)' "$1" "$g" "$(tail -n 1 "$work/$1.ratios")" "$(tail -n 1 "$work/$1.cpu")"
}
: >"$work/shas"
r=0
while [ $r -lt "$rounds" ]; do
    t0=$(now)
    openssl dgst -sha256 "$src" >/dev/null
    sha=$(rate "$bytes" "$t0" "$(now)")
    echo "$sha" >>"$work/shas"
    printf '  round %d: openssl %s GB/s' $((r + 1)) "$sha"
    # the order alternates, so neither server always follows the hash
    if [ -n "$other" ] && [ $((r % 2)) = 1 ]; then
        put old $r
        put new $r
    else
        put new $r
        [ -z "$other" ] || put old $r
    fi
    echo
    r=$((r + 1))
done
size=$(awk -v b="$bytes" 'BEGIN { if (b >= 2^30) printf "%.0f GiB", b / 2^30; else printf "%.0f MiB", b / 2^20 }')
m_sha=$(median <"$work/shas")
for name in new old; do
    [ -f "$work/$name.puts" ] || continue
    label=""
    [ "$name" = old ] && label=" ($other)"
    m_ratio=$(median <"$work/$name.ratios")
    m_put=$(median <"$work/$name.puts")
    m_cpu=$(median <"$work/$name.cpu")
    printf 'upload ingest%s, PUT %s (median of %d): %s GB/s; openssl dgst -sha256 %s GB/s; ratio %s; server CPU %s s/GiB\n' \
        "$label" "$size" "$rounds" "$m_put" "$m_sha" "$m_ratio" "$m_cpu"
    [ "$name" = new ] || continue
    bench_result "upload ingest, PUT $size (median of $rounds paired rounds)" "$m_put" GB/s \
        "openssl dgst -sha256 same file" "$m_sha" "$m_ratio"
    bench_result "upload ingest, server CPU per GiB" "$m_cpu" s "" "" ""
done
