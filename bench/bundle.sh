#!/bin/sh
# bench/bundle.sh [BUILD_DIR]: the bundle route (GET .../versions/{rev}/bundle),
# each figure next to its anchor measured in the same run on the same machine:
#   200 whole tensors in one bundle request       vs  one file Range GET of the same byte count
#   the same 200 tensors sliced [::2] (a gather)  vs  one file Range GET of the same byte count
#   the same 200 tensors, POST with 200 names     vs  the GET's figure
#   the server's CPU seconds per GB of the bundle vs  the same for the Range GET (from /proc)
# The model holds 400 F32 tensors; the bundle takes every other one (so its bytes are
# 200 separate runs of the file). Every download is one `curl -o /dev/null` on
# loopback; figures are best/median of a few repetitions and the ratio is of the
# medians. BENCH_QUICK=1: 400 tensors of 64 KiB (a smoke run, ~1 minute with the
# build); else 400 of 1 MiB. Timing never fails anything: the script fails only
# when a step cannot run (the server does not start, a request answers the wrong
# status or the wrong number of bytes).
set -eu
cd "$(dirname "$0")/.."
. bench/results.sh
build=${1:-build}
bin=$build/tensorgate
py=/usr/bin/python3

if [ "${BENCH_QUICK:-0}" = 1 ]; then
    side=128 # [128, 128] F32 = 64 KiB a tensor
    reps=5
else
    side=512 # [512, 512] F32 = 1 MiB a tensor
    reps=7
fi
count=400
if ! command -v curl >/dev/null 2>&1; then
    echo "bench/bundle.sh: curl missing" >&2
    exit 2
fi
[ -x "$bin" ] || { echo "bench/bundle.sh: $bin is not built" >&2; exit 2; }

work=$(mktemp -d /tmp/tg-bench-bundle-XXXXXX)
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b <= 0) { print "n/a"; exit } printf "%.3gx", a / b }'; }
line() { printf '%-52s %12s %-4s  anchor %-30s %12s %-4s  ratio %s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7"
    bench_result "$1" "$2" "$3" "$4" "$5" "$7"
}
best_median() {
    # shellcheck disable=SC2086 # split the figures, one per line
    printf '%s\n' $1 | sort -g | awk '{ v[NR] = $1 } END {
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.3f/%.3f", v[NR], m }'
}
median_of() { echo "${1#*/}"; }

# --- the model: 400 F32 tensors [side, side], named t000..t399, in name order
"$py" - "$work/model.safetensors" "$side" "$count" <<'EOF'
import json, struct, sys
import numpy as np
path, side, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = side * side * 4
header = {"t%03d" % i: {"dtype": "F32", "shape": [side, side], "data_offsets": [i * n, (i + 1) * n]}
          for i in range(count)}
h = json.dumps(header, separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
rng = np.random.default_rng(1)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for i in range(count):
        f.write(rng.standard_normal(side * side, dtype=np.float32).tobytes())
EOF

log=$work/server.log
"$bin" serve --listen 127.0.0.1:0 --data "$work/data" 2>"$log" &
server_pid=$!
# a server that does not start: its log on stderr, and this script exits 2
port=$(bench_server_port bundle.sh "$log" "$server_pid") || exit 2
base=http://127.0.0.1:$port
token=$("$bin" token create --data "$work/data" --scope write 2>/dev/null | tail -n 1)

api() { # api METHOD PATH [curl args...] -> prints the HTTP status
    m=$1
    p=$2
    shift 2
    curl -sS -o "$work/resp" -w '%{http_code}' -X "$m" -H "Authorization: Bearer $token" -H 'Expect:' "$@" "$base$p"
}
must() { # must STATUS STEP...
    want=$1
    shift
    got=$("$@")
    if [ "$got" != "$want" ]; then
        echo "bench/bundle.sh: $* -> $got (expected $want): $(head -c 300 "$work/resp")" >&2
        exit 2
    fi
}

version=/v1/models/bench/b/versions/1
must 201 api POST /v1/models -H 'Content-Type: application/json' --data '{"name":"bench/b"}'
must 201 api POST /v1/models/bench/b/versions
must 201 api PUT "$version/files/model.safetensors" -T "$work/model.safetensors"
must 200 api POST "$version/publish"
rm -f "$work/model.safetensors"

# the selection: every other tensor (t000, t002, ...): 200 names
names=$(awk -v c="$count" 'BEGIN { s = ""; for (i = 0; i < c; i += 2) s = s (i ? "," : "") sprintf("t%03d", i); print s }')
sliced=$(echo "$names" | sed 's/\(t[0-9][0-9][0-9]\)/\1[::2]/g')
printf '{"tensors":["%s"]}' "$(echo "$names" | sed 's/,/","/g')" >"$work/post.json"
bundle_url="$base$version/bundle?tensors=$names"
sliced_url="$base$version/bundle?tensors=$(echo "$sliced" | sed 's/\[/%5B/g; s/\]/%5D/g')"
file_url=$base$version/files/model.safetensors

# the bundle's length (HEAD) and its data bytes
length_of() { curl -sSI "$1" | tr -d '\r' | awk -F': ' 'tolower($1) == "content-length" { print $2 }'; }
whole_len=$(length_of "$bundle_url")
sliced_len=$(length_of "$sliced_url")
if [ -z "$whole_len" ] || [ -z "$sliced_len" ]; then
    echo "bench/bundle.sh: HEAD of a bundle failed" >&2
    exit 2
fi

# one URL STATUS BYTES [curl args...] -> one GB/s figure of one download
one() {
    url=$1
    want_status=$2
    want_bytes=$3
    shift 3
    out=$(curl -sS -o /dev/null -w '%{http_code} %{size_download} %{time_total}' "$@" "$url")
    st=${out%% *}
    rest=${out#* }
    got=${rest%% *}
    secs=${rest#* }
    if [ "$st" != "$want_status" ] || [ "$got" != "$want_bytes" ]; then
        echo "bench/bundle.sh: $url $* -> $st, $got bytes (expected $want_status, $want_bytes)" >&2
        exit 2
    fi
    awk -v b="$want_bytes" -v s="$secs" 'BEGIN { if (s <= 0) s = 1e-9; printf "%.4f", b / s / 1e9 }'
}

# pair LABEL ANCHOR_LABEL BYTES -- the figure and its anchor measured in turns ($reps
# each, A B A B ...: on a shared machine both see the same load); A and B are given
# as the shell functions fig_a and fig_b
pair() {
    fa=""
    fb=""
    r=0
    while [ $r -lt "$reps" ]; do
        fa="$fa $(fig_a)"
        fb="$fb $(fig_b)"
        r=$((r + 1))
    done
    a=$(best_median "$fa")
    b=$(best_median "$fb")
    line "$1" "$a" GB/s "$2" "$b" GB/s "$(ratio "$(median_of "$a")" "$(median_of "$b")")"
}

echo "bundle benchmarks ($(nproc) cores; $count F32 tensors [$side, $side], a bundle of every other one; best/median GB/s of $reps curl -o /dev/null)"
curl -sS -o /dev/null "$file_url" # the page cache warm for every figure

fig_a() { one "$bundle_url" 200 "$whole_len"; }
fig_b() { one "$file_url" 206 "$whole_len" -H "Range: bytes=0-$((whole_len - 1))"; }
pair "bundle GET of 200 whole tensors" "file Range GET same bytes"

fig_a() { one "$sliced_url" 200 "$sliced_len"; }
fig_b() { one "$file_url" 206 "$sliced_len" -H "Range: bytes=0-$((sliced_len - 1))"; }
pair "bundle GET of 200 tensors [::2]" "file Range GET same bytes"

# the server's CPU time (user + system, from /proc) per GB sent: less sensitive than
# wall time to what else the machine runs; the same downloads, $reps of each, in turns
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$server_pid/stat"; }
hz=$(getconf CLK_TCK)
cpu_a=0
cpu_b=0
r=0
while [ $r -lt "$reps" ]; do
    t0=$(cpu_ticks)
    one "$bundle_url" 200 "$whole_len" >/dev/null
    t1=$(cpu_ticks)
    one "$file_url" 206 "$whole_len" -H "Range: bytes=0-$((whole_len - 1))" >/dev/null
    t2=$(cpu_ticks)
    cpu_a=$((cpu_a + t1 - t0))
    cpu_b=$((cpu_b + t2 - t1))
    r=$((r + 1))
done
per_gb() { awk -v t="$1" -v hz="$hz" -v n="$reps" -v b="$whole_len" 'BEGIN { printf "%.3f", t / hz / (n * b / 1e9) }'; }
ca=$(per_gb $cpu_a)
cb=$(per_gb $cpu_b)
line "server CPU s/GB, bundle of 200 whole tensors" "$ca" s/GB "file Range GET same bytes" "$cb" s/GB \
    "$(ratio "$ca" "$cb")"

fig_a() { one "$base$version/bundle" 200 "$whole_len" -X POST -H 'Content-Type: application/json' --data-binary "@$work/post.json"; }
fig_b() { one "$bundle_url" 200 "$whole_len"; }
pair "bundle POST of 200 whole tensors" "bundle GET of the same"
