#!/bin/sh
# bench/tensors.sh [BUILD_DIR]: HTTP benchmarks of tensor serving
# (GET .../versions/{rev}/tensors/{tensor}), each figure printed next to its
# anchor measured in the same run on the same machine:
#   tensor GET of a 1 GiB F32 tensor            vs  the same bytes by the file route with Range
#   ?slice=::2,::2, a column-block slice, ::-1   vs  a file Range GET of the same byte count,
#                                               and memcpy of the same output size (C helper)
#   ?dtype=BF16 and ?dtype=F16 (input bytes/s)  vs  the plain tensor GET of the same tensor
#   GET through a 120k-name index (first, cached) vs  the GET of a version without an index
#   GET on a 300k-tensor (~20 MB header) file (first, cached) vs  the same on a 10-tensor file
# Every download is one `curl -o /dev/null` on loopback; figures are best and
# median of a few repetitions; ratios compare bests, except a slice against its plain
# Range GET, which compares medians (goal 3 of docs/PERFORMANCE.md). BENCH_QUICK=1 uses a 64 MiB tensor (a smoke run,
# figures meaningless). Timing never fails anything: the script fails only when
# a step cannot run (server does not start, a request answers the wrong status
# or the wrong number of bytes).
set -eu
cd "$(dirname "$0")/.."
. bench/results.sh
build=${1:-build}
bin=$build/tensorgate
py=/usr/bin/python3

if [ "${BENCH_QUICK:-0}" = 1 ]; then
    side=4096 # [4096, 4096] F32 = 64 MiB
    reps=3
else
    side=16384 # [16384, 16384] F32 = 1 GiB
    reps=5
fi
tensor_bytes=$((side * side * 4))
# the column block: the middle half of the columns, every row
col_begin=$((side / 4))
col_end=$((side * 3 / 4))

for tool in curl cc; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "bench/tensors.sh: $tool missing" >&2
        exit 2
    fi
done
[ -x "$bin" ] || { echo "bench/tensors.sh: $bin is not built" >&2; exit 2; }

work=$(mktemp -d /tmp/tg-bench-tensors-XXXXXX)
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

human() { awk -v b="$1" 'BEGIN { if (b >= 2^30) printf "%.1f GiB", b / 2^30; else printf "%.0f MiB", b / 2^20 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b <= 0) { print "n/a"; exit } printf "%.3gx", a / b }'; }
line() { printf '%-50s %16s %-4s  anchor %-28s %16s %-4s  ratio %s\n' "$1" "$2" "$3" "$4" "$5" "$6" "$7"
    bench_result "$1" "$2" "$3" "$4" "$5" "$7"
}
# best_median "g1 g2 ..." -> "best/median" (GB/s figures)
best_median() {
    # shellcheck disable=SC2086 # split the figures, one per line
    printf '%s\n' $1 | sort -g | awk '{ v[NR] = $1 } END {
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.2f/%.2f", v[NR], m }'
}
best_of() { echo "${1%%/*}"; }
median_of() { echo "${1#*/}"; }

# --- the memcpy anchor: a tiny C helper, same output sizes as the slices
cat >"$work/memcpy_rate.c" <<'EOF'
/* memcpy_rate BYTES REPS: best memcpy GB/s (10^9 B/s) between two buffers of BYTES,
 * both touched first so page faults are not timed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static volatile unsigned char sink;
int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    size_t bytes = strtoull(argv[1], NULL, 10);
    int reps = atoi(argv[2]);
    unsigned char *src = malloc(bytes), *dst = malloc(bytes);
    if (src == NULL || dst == NULL || bytes == 0)
        return 1;
    memset(src, 1, bytes);
    memset(dst, 0, bytes);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now_seconds();
        memcpy(dst, src, bytes);
        double t1 = now_seconds();
        sink = dst[bytes / 2];
        if (t1 - t0 < best)
            best = t1 - t0;
    }
    printf("%.2f\n", (double)bytes / best / 1e9);
    free(src);
    free(dst);
    return 0;
}
EOF
cc -std=c11 -D_GNU_SOURCE -O2 -o "$work/memcpy_rate" "$work/memcpy_rate.c"

# --- the model: one F32 tensor [side, side] of normal values, 64 MiB pieces
"$py" - "$work/model.safetensors" "$side" <<'EOF'
import json, struct, sys
import numpy as np
path, side = sys.argv[1], int(sys.argv[2])
n = side * side * 4
h = json.dumps({"w": {"dtype": "F32", "shape": [side, side], "data_offsets": [0, n]}},
               separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
rng = np.random.default_rng(1)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    left = side * side
    while left:
        k = min(left, 16 << 20)
        f.write(rng.standard_normal(k, dtype=np.float32).tobytes())
        left -= k
EOF

# --- server on a free loopback port, temp data dir
log=$work/server.log
"$bin" serve --listen 127.0.0.1:0 --data "$work/data" 2>"$log" &
server_pid=$!
# a server that does not start: its log on stderr, and this script exits 2
port=$(bench_server_port tensors.sh "$log" "$server_pid") || exit 2
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
        echo "bench/tensors.sh: $* -> $got (expected $want): $(head -c 300 "$work/resp")" >&2
        exit 2
    fi
}

version=/v1/models/bench/t/versions/1
must 201 api POST /v1/models -H 'Content-Type: application/json' --data '{"name":"bench/t"}'
must 201 api POST /v1/models/bench/t/versions
must 201 api PUT "$version/files/model.safetensors" -T "$work/model.safetensors"
must 200 api POST "$version/publish"
rm -f "$work/model.safetensors"
must 200 api GET "$version/files/model.safetensors/header"
# the tensor's absolute [begin, end) in the file, from the header route
offsets=$("$py" -c 'import json, sys
t = [t for t in json.load(open(sys.argv[1]))["tensors"] if t["name"] == "w"][0]
print(*t["data_offsets"])' "$work/resp")
abs_begin=${offsets% *}
abs_end=${offsets#* }
if [ $((abs_end - abs_begin)) != "$tensor_bytes" ]; then
    echo "bench/tensors.sh: tensor w spans $abs_begin..$abs_end, expected $tensor_bytes bytes" >&2
    exit 2
fi

tensor_url=$base$version/tensors/w
file_url=$base$version/files/model.safetensors

# fetch URL STATUS BYTES [curl args...] -> "best/median" GB/s over $reps curl
# downloads to /dev/null, rated by RATE_BYTES (default: BYTES downloaded)
fetch() {
    url=$1
    want_status=$2
    want_bytes=$3
    shift 3
    rated=${RATE_BYTES:-$want_bytes}
    figures=""
    r=0
    while [ $r -lt "$reps" ]; do
        out=$(curl -sS -o /dev/null -w '%{http_code} %{size_download} %{time_total}' "$@" "$url")
        st=${out%% *}
        rest=${out#* }
        got=${rest%% *}
        secs=${rest#* }
        if [ "$st" != "$want_status" ] || [ "$got" != "$want_bytes" ]; then
            echo "bench/tensors.sh: GET $url $* -> $st, $got bytes (expected $want_status, $want_bytes)" >&2
            exit 2
        fi
        figures="$figures $(awk -v b="$rated" -v s="$secs" 'BEGIN { if (s <= 0) s = 1e-9; printf "%.3f", b / s / 1e9 }')"
        r=$((r + 1))
    done
    best_median "$figures"
}

echo "tensor serving benchmarks ($(nproc) cores; F32 tensor [$side, $side] = $(human $tensor_bytes); best/median of $reps curl -o /dev/null)"

# warm the page cache for both routes' source (the same blob)
curl -sS -o /dev/null "$file_url"

# 1. tensor GET vs the same bytes by Range on the file route
t_plain=$(fetch "$tensor_url" 200 "$tensor_bytes")
t_range=$(fetch "$file_url" 206 "$tensor_bytes" -H "Range: bytes=$abs_begin-$((abs_end - 1))")
line "tensor GET $(human $tensor_bytes) F32" "$t_plain" GB/s \
    "file Range GET same bytes" "$t_range" GB/s "$(ratio "$(best_of "$t_plain")" "$(best_of "$t_range")")"

# 2. strided slices (GB/s of output bytes) vs a plain GET that sends the same number
#    of bytes over the same kind of connection (a Range GET of the file route:
#    sendfile, no user copy), and vs memcpy of the same output size
slice_line() { # slice_line LABEL SLICE OUT_BYTES
    # the slice and its anchor alternate, so that a change of load falls on both
    gs=""
    ps=""
    k=0
    while [ $k -lt "$reps" ]; do
        one_slice=$(reps=1 fetch "$tensor_url?slice=$2" 200 "$3")
        one_plain=$(reps=1 fetch "$file_url" 206 "$3" -H "Range: bytes=$abs_begin-$((abs_begin + $3 - 1))")
        gs="$gs ${one_slice%%/*}"
        ps="$ps ${one_plain%%/*}"
        k=$((k + 1))
    done
    got=$(best_median "$gs")
    plain=$(best_median "$ps")
    mc=$("$work/memcpy_rate" "$3" "$reps")
    # goal 3 is judged on medians (a best run of either side says little on a busy machine)
    line "$1 ($(human "$3") out)" "$got" GB/s "plain Range GET same byte count" "$plain" GB/s \
        "$(ratio "$(median_of "$got")" "$(median_of "$plain")")"
    line "$1 ($(human "$3") out)" "$got" GB/s "memcpy same output size" "$mc" GB/s \
        "$(ratio "$(best_of "$got")" "$mc")"
}
slice_line "slice ::2,::2" "::2,::2" $((tensor_bytes / 4))
slice_line "slice :,$col_begin:$col_end (column block)" ":,$col_begin:$col_end" \
    $((side * (col_end - col_begin) * 4))
slice_line "slice ::-1" "::-1" "$tensor_bytes"

# 3. conversion while streaming, rated by input bytes, vs the plain tensor GET
for dt in BF16 F16; do
    got=$(RATE_BYTES=$tensor_bytes fetch "$tensor_url?dtype=$dt" 200 $((tensor_bytes / 2)))
    line "?dtype=$dt (GB/s of F32 input)" "$got" GB/s "plain tensor GET same tensor" "$t_plain" GB/s \
        "$(ratio "$(best_of "$got")" "$(best_of "$t_plain")")"
done

# 4. a tensor GET through a large index (120,000 weight_map names, ~14 MB): the
#    first GET reads and parses it, later ones find the shard in the index cache;
#    vs the same tensor from a version without an index (latency, ms)
"$py" - "$work" <<'EOF2'
import json, struct, sys
w = sys.argv[1]
h = json.dumps({"x": {"dtype": "F32", "shape": [256], "data_offsets": [0, 1024]}},
               separators=(",", ":")).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(w + "/small.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + bytes(1024))
names = ("model.layers.%d.mlp.experts.%d.gate_up_proj.weight_scale_inv" % (i // 1000, i % 1000)
         for i in range(120000))
wm = {n: "model-%05d-of-00160.safetensors" % (i % 160 + 1) for i, n in enumerate(names)}
wm["x"] = "model-00001-of-00160.safetensors"
json.dump({"metadata": {}, "weight_map": wm}, open(w + "/index.json", "w"), indent=2)
EOF2
shard=model-00001-of-00160.safetensors
must 201 api POST /v1/models/bench/t/versions
must 201 api PUT /v1/models/bench/t/versions/2/files/$shard -T "$work/small.safetensors"
must 201 api PUT /v1/models/bench/t/versions/2/files/model.safetensors.index.json -T "$work/index.json"
must 201 api POST /v1/models/bench/t/versions
must 201 api PUT /v1/models/bench/t/versions/3/files/$shard -T "$work/small.safetensors"
index_bytes=$(wc -c <"$work/index.json")
# latency URL -> "best/median" ms over $reps GETs (best is the lowest)
latency() {
    figures=""
    r=0
    while [ $r -lt "$reps" ]; do
        out=$(curl -sS -o /dev/null -w '%{http_code} %{time_total}' "$1")
        [ "${out%% *}" = 200 ] || { echo "bench/tensors.sh: GET $1 -> ${out%% *}" >&2; exit 2; }
        figures="$figures $(awk -v s="${out#* }" 'BEGIN { printf "%.3f", s * 1e3 }')"
        r=$((r + 1))
    done
    # shellcheck disable=SC2086 # split the figures, one per line
    printf '%s\n' $figures | sort -g | awk '{ v[NR] = $1 } END {
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.2f/%.2f", v[1], m }'
}
first=$(curl -sS -o /dev/null -w '%{time_total}' "$base/v1/models/bench/t/versions/2/tensors/x")
first_ms=$(awk -v s="$first" 'BEGIN { printf "%.1f", s * 1e3 }')
cached=$(latency "$base/v1/models/bench/t/versions/2/tensors/x")
plain=$(latency "$base/v1/models/bench/t/versions/3/tensors/x")
line "tensor GET via $(human "$index_bytes") index, first" "$first_ms" ms \
    "GET, version without index" "$plain" ms "$(ratio "$first_ms" "$(best_of "$plain")")"
line "tensor GET via $(human "$index_bytes") index, cached" "$cached" ms \
    "GET, version without index" "$plain" ms "$(ratio "$(best_of "$cached")" "$(best_of "$plain")")"

# 5. a tensor GET on a file with a 300,000-tensor header (~20 MB): the first GET
#    reads and parses the header, later ones use the parsed-header cache; vs the
#    same GETs on a 10-tensor file (latency, ms), and the server's peak RSS during
#    32 concurrent GETs on a third, not yet read, 300,000-tensor file
"$py" - "$work" <<'EOF2'
import json, struct, sys
w = sys.argv[1]
def write(path, count, seed):
    t = {"model.layers.%d.experts.%d.w%d" % (i // 1000, i % 1000, seed):
         {"dtype": "U8", "shape": [1], "data_offsets": [i, i + 1]} for i in range(count)}
    h = json.dumps(t, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + bytes(count))
write(w + "/big.safetensors", 300000, 0)
write(w + "/big2.safetensors", 300000, 1)
write(w + "/ten.safetensors", 10, 0)
EOF2
big_header=$(($(wc -c <"$work/big.safetensors") - 300000 - 8))
version_of_resp() { sed -n 's/.*"version":\([0-9]*\).*/\1/p' "$work/resp"; }
must 201 api POST /v1/models/bench/t/versions
v_big=$(version_of_resp)
must 201 api PUT "/v1/models/bench/t/versions/$v_big/files/model.safetensors" -T "$work/big.safetensors"
must 201 api POST /v1/models/bench/t/versions
v_ten=$(version_of_resp)
must 201 api PUT "/v1/models/bench/t/versions/$v_ten/files/model.safetensors" -T "$work/ten.safetensors"
must 201 api POST /v1/models/bench/t/versions
v_big2=$(version_of_resp)
must 201 api PUT "/v1/models/bench/t/versions/$v_big2/files/model.safetensors" -T "$work/big2.safetensors"
rm -f "$work/big.safetensors" "$work/big2.safetensors" "$work/ten.safetensors"
big_url="$base/v1/models/bench/t/versions/$v_big/tensors/model.layers.150.experts.0.w0"
ten_url="$base/v1/models/bench/t/versions/$v_ten/tensors/model.layers.0.experts.5.w0"
ms_once() { awk -v s="$(curl -sS -o /dev/null -w '%{time_total}' "$1")" 'BEGIN { printf "%.1f", s * 1e3 }'; }
big_first=$(ms_once "$big_url")
ten_first=$(ms_once "$ten_url")
big_cached=$(latency "$big_url")
ten_cached=$(latency "$ten_url")
line "tensor GET, $(human "$big_header") header (300k tensors), first" "$big_first" ms \
    "GET, 10-tensor file, first" "$ten_first" ms "$(ratio "$big_first" "$ten_first")"
line "tensor GET, $(human "$big_header") header (300k tensors), cached" "$big_cached" ms \
    "GET, 10-tensor file, cached" "$ten_cached" ms "$(ratio "$(best_of "$big_cached")" "$(best_of "$ten_cached")")"
status_kib() { sed -n "s/^$1:[[:space:]]*\([0-9]*\).*/\1/p" "/proc/$server_pid/status"; }
rss_before=$(status_kib VmRSS)
echo 5 >"/proc/$server_pid/clear_refs" 2>/dev/null || true # VmHWM starts again from VmRSS
i=0
pids=""
while [ $i -lt 32 ]; do
    curl -sS -o /dev/null "$base/v1/models/bench/t/versions/$v_big2/tensors/model.layers.$i.experts.1.w1" &
    pids="$pids $!"
    i=$((i + 1))
done
# shellcheck disable=SC2086 # one pid per word
wait $pids
rss_peak=$(status_kib VmHWM)
printf '%-50s %16s %-4s  anchor %-28s %16s %-4s\n' "server peak RSS during 32 concurrent GETs (cold)" \
    "$((rss_peak / 1024))" MiB "RSS before them" "$((rss_before / 1024))" MiB
