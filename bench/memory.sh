#!/bin/sh
# bench/memory.sh BUILD_DIR: server memory under load (issue 13, goal 7). wrk with 64
# connections in all (32 on a header GET, 32 on a tensor GET of a published
# version) for 60 s while uploads run one after another (64 MiB each, into a draft,
# deleted again), the server's VmRSS sampled every second; prints the mean RSS of
# the first and of the last 10 s (and the peak): flat means no growth between them.
# BENCH_QUICK=1: 3 s, 1-s windows, 16 MiB uploads (a smoke run).
# Timing never fails anything: the script fails only when a step cannot run.
set -eu
cd "$(dirname "$0")/.."
. bench/results.sh
build=${1:-build}
bin=$build/tensorgate
py=/usr/bin/python3

if [ "${BENCH_QUICK:-0}" = 1 ]; then
    seconds=3
    window=1
    upload_mib=16
else
    seconds=60
    window=10
    upload_mib=64
fi

for tool in curl wrk; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "bench/memory.sh: $tool missing (scripts/install-deps.sh --bench installs it)" >&2
        exit 2
    }
done
[ -x "$bin" ] || { echo "bench/memory.sh: $bin is not built" >&2; exit 2; }

work=$(mktemp -d /tmp/tg-bench-memory-XXXXXX)
server_pid=""
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

"$py" - "$work" "$upload_mib" <<'PY'
import json, struct, sys
w, mib = sys.argv[1], int(sys.argv[2])
def write(path, tensors, fill):
    h = json.dumps(tensors, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    end = max(t["data_offsets"][1] for t in tensors.values())
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        left = end
        chunk = bytes([fill]) * (1 << 20)
        while left:
            n = min(left, len(chunk)); f.write(chunk[:n]); left -= n
# served: 200 tensors, one of them 1 MiB (the tensor GET)
t = {"layer.%d.w" % i: {"dtype": "F32", "shape": [16], "data_offsets": [64 * i, 64 * i + 64]}
     for i in range(200)}
t["big"] = {"dtype": "F32", "shape": [512, 512], "data_offsets": [12800, 12800 + (1 << 20)]}
write(w + "/served.safetensors", t, 0)
n = mib << 20
write(w + "/upload.safetensors", {"u": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}, 1)
PY

# wrk's 64 connections and the uploads all come from 127.0.0.1
"$bin" serve --listen 127.0.0.1:0 --data "$work/data" --max-per-ip 256 2>"$work/server.log" &
server_pid=$!
port=""
i=0
while [ $i -lt 300 ]; do
    port=$(sed -n 's|.*tensorgate: listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/server.log" | tail -n 1)
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
    i=$((i + 1))
done
[ -n "$port" ] || { echo "bench/memory.sh: the server did not start:" >&2; cat "$work/server.log" >&2; exit 2; }
base=http://127.0.0.1:$port
token=$("$bin" token create --data "$work/data" --scope write 2>/dev/null | tail -n 1)
api() { # api STATUS METHOD PATH [curl args]
    want=$1
    shift
    m=$1
    p=$2
    shift 2
    got=$(curl -sS -o "$work/resp" -w '%{http_code}' -X "$m" -H "Authorization: Bearer $token" -H 'Expect:' "$@" "$base$p")
    if [ "$got" != "$want" ]; then
        echo "bench/memory.sh: $m $p -> $got (expected $want): $(head -c 300 "$work/resp")" >&2
        exit 2
    fi
}
api 201 POST /v1/models -H 'Content-Type: application/json' --data '{"name":"bench/mem"}'
api 201 POST /v1/models/bench/mem/versions
api 201 PUT /v1/models/bench/mem/versions/1/files/model.safetensors -T "$work/served.safetensors"
api 200 POST /v1/models/bench/mem/versions/1/publish
api 201 POST /v1/models/bench/mem/versions
header_url=$base/v1/models/bench/mem/versions/1/files/model.safetensors/header
tensor_url=$base/v1/models/bench/mem/versions/1/tensors/big

# uploads one after another into draft 2, each deleted again, until told to stop
(
    k=0
    while [ ! -e "$work/stop" ]; do
        curl -sS -o /dev/null -H "Authorization: Bearer $token" -H 'Expect:' \
            -T "$work/upload.safetensors" "$base/v1/models/bench/mem/versions/2/files/u$k.safetensors" || true
        curl -sS -o /dev/null -X DELETE -H "Authorization: Bearer $token" \
            "$base/v1/models/bench/mem/versions/2/files/u$k.safetensors" || true
        k=$((k + 1))
    done
    echo "$k" >"$work/uploads"
) &
pids="$pids $!"

wrk -t 1 -c 32 -d "${seconds}s" "$header_url" >"$work/wrk-header" 2>&1 &
pids="$pids $!"
wrk -t 1 -c 32 -d "${seconds}s" "$tensor_url" >"$work/wrk-tensor" 2>&1 &
pids="$pids $!"

t=0
: >"$work/samples"
while [ $t -lt "$seconds" ]; do
    sleep 1
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$server_pid/status")
    echo "$t $rss" >>"$work/samples"
    t=$((t + 1))
done
wait $(echo "$pids" | awk '{ print $2, $3 }') 2>/dev/null || true
touch "$work/stop"
wait $(echo "$pids" | awk '{ print $1 }') 2>/dev/null || true
pids=""

avg() { # avg FROM TO -> mean VmRSS KiB of samples with FROM <= t < TO
    awk -v a="$1" -v b="$2" '$1 >= a && $1 < b { s += $2; n++ } END { if (n) printf "%.0f", s / n; else print 0 }' "$work/samples"
}
first=$(avg 0 "$window")
last=$(avg $((seconds - window)) "$seconds")
peak=$(awk '{ if ($2 > m) m = $2 } END { print m + 0 }' "$work/samples")
rps() { awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$1"; }
echo "memory under load ($(nproc) cores; ${seconds}s of wrk -c64: $(rps "$work/wrk-header") header req/s + $(rps "$work/wrk-tensor") tensor req/s; $(cat "$work/uploads" 2>/dev/null || echo '?') uploads of ${upload_mib} MiB)"
printf '%-44s %10s %-6s  anchor %-30s %10s %-6s  ratio %s\n' "server RSS, last ${window}s (mean)" \
    "$((last / 1024))" MiB "first ${window}s (mean)" "$((first / 1024))" MiB \
    "$(awk -v a="$last" -v b="$first" 'BEGIN { if (b > 0) printf "%.3gx", a / b; else print "n/a" }')"
echo "  (peak $((peak / 1024)) MiB; samples: $(awk '{ printf "%d ", $2 / 1024 }' "$work/samples")MiB)"
bench_result "server RSS under wrk -c64 + uploads, last ${window}s" "$((last / 1024))" MiB \
    "first ${window}s" "$((first / 1024))"
