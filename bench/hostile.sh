#!/bin/sh
# bench/hostile.sh [BUILD_DIR]: load with hostile clients mixed in. wrk (2 threads,
# 64 connections, 60 s) alternates a header GET and a tensor GET of a published
# version while, beside it, from other loopback addresses (so the per-IP connection
# limit of each is its own):
#   slowloris   127.0.0.2, 127.0.0.3: up to 100 connections each, each sending a
#               request head one header line every 5 s, never finishing it
#   oversized   127.0.0.4: 300 KiB header lines, 300 KiB query strings, 1 MiB JSON
#               bodies (declared and chunked), one after the other
#   refused     127.0.0.5: chunked pickle uploads of 8 MiB with a write token, two
#   uploads     at a time
# The server runs with its defaults. Every second the server's VmRSS and open
# descriptors (/proc/PID/fd) are sampled. Printed: wrk's requests and its non-2xx
# answers and socket errors (the well-behaved clients: the aim is 0), what each
# hostile client got, and RSS and descriptors averaged over the first and the last
# 10 s of the wrk run (the aim: flat). BENCH_QUICK=1 runs 12 s (3 s windows).
# Figures never fail the script; it fails only when a step cannot run.
set -eu
cd "$(dirname "$0")/.."
. bench/results.sh
build=${1:-build}
bin=$build/tensorgate
py=/usr/bin/python3

if [ "${BENCH_QUICK:-0}" = 1 ]; then
    seconds=12
    window=3
else
    seconds=60
    window=10
fi
lead=5 # the hostile clients start this long before wrk, and stop after it

for tool in curl wrk; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "bench/hostile.sh: $tool missing (scripts/install-deps.sh --bench installs it)" >&2
        exit 2
    fi
done
[ -x "$py" ] || { echo "bench/hostile.sh: $py missing" >&2; exit 2; }
[ -x "$bin" ] || { echo "bench/hostile.sh: $bin is not built" >&2; exit 2; }

work=$(mktemp -d /tmp/tg-bench-hostile-XXXXXX)
server_pid=""
hostile_pid=""
sampler_pid=""
cleanup() {
    for p in $sampler_pid $hostile_pid; do
        kill "$p" 2>/dev/null || true
    done
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

"$bin" serve --listen 127.0.0.1:0 --data "$work/data" 2>"$work/server.log" &
server_pid=$!
port=""
i=0
while [ $i -lt 300 ]; do
    port=$(sed -n 's|.*tensorgate: listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/server.log" 2>/dev/null | tail -n 1)
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
    i=$((i + 1))
done
if [ -z "$port" ]; then
    echo "bench/hostile.sh: the server did not start:" >&2
    cat "$work/server.log" >&2
    exit 2
fi
base=http://127.0.0.1:$port
token=$("$bin" token create --data "$work/data" --scope write --namespace bench 2>/dev/null | tail -n 1)

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
        echo "bench/hostile.sh: $* -> $got (expected $want): $(head -c 300 "$work/resp")" >&2
        exit 2
    fi
}

# the fixture: bench/m version 1 published with model.safetensors (tensors w0..w15,
# F32 [128, 128], 64 KiB each); version 2 a draft the refused uploads aim at
"$py" - "$work/model.safetensors" <<'EOF'
import json, struct, sys
n, side = 16, 128
size = side * side * 4
h = {f"w{i}": {"dtype": "F32", "shape": [side, side], "data_offsets": [i * size, (i + 1) * size]} for i in range(n)}
h = json.dumps(h, separators=(",", ":")).encode()
h += b" " * ((8 - (8 + len(h)) % 8) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    f.write(bytes(range(256)) * (n * size // 256))
EOF
must 201 api POST /v1/models -H 'Content-Type: application/json' --data '{"name":"bench/m"}'
must 201 api POST /v1/models/bench/m/versions
must 201 api PUT /v1/models/bench/m/versions/1/files/model.safetensors -T "$work/model.safetensors"
must 200 api POST /v1/models/bench/m/versions/1/publish
must 201 api POST /v1/models/bench/m/versions
header_path=/v1/models/bench/m/versions/1/files/model.safetensors/header
tensor_path=/v1/models/bench/m/versions/1/tensors/w7
must 200 api GET "$header_path"
must 200 api GET "$tensor_path"

cat >"$work/mix.lua" <<EOF
local paths = {"$header_path", "$tensor_path"}
local n = 0
request = function()
    n = n + 1
    return wrk.format("GET", paths[n % 2 + 1])
end
EOF

# --- the hostile clients (Python, standard library only)
cat >"$work/hostile.py" <<'EOF'
import json, os, random, select, socket, sys, threading, time

host, port, token, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
stop = time.time() + seconds
lock = threading.Lock()
stats = {}

def count(key, n=1):
    with lock:
        stats[key] = stats.get(key, 0) + n

def connect(src):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.settimeout(10)
    s.connect((host, port))
    return s

def status_of(s):
    """The status of the answer (or 'closed', 'reset', 'timeout')."""
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                return "closed"
            data += chunk
    except socket.timeout:
        return "timeout"
    except OSError:
        return "reset"
    parts = data.split(b"\r\n", 1)[0].split()
    return parts[1].decode() if len(parts) > 1 else "garbled"

def slowloris(src, n):
    conns = []
    held = 0
    while time.time() < stop:
        while len(conns) < n:
            try:
                s = connect(src)
                s.sendall(b"GET /v1/models HTTP/1.1\r\nHost: tensorgate\r\n")
                conns.append(s)
                count("slowloris connections opened")
            except OSError:
                count("slowloris connects refused")
                break
        time.sleep(5)
        for s in list(conns):
            # readable: the server answered (408, 431...) or closed; either way it is over
            closed = bool(select.select([s], [], [], 0)[0])
            if not closed:
                try:
                    s.sendall(b"X-Slow-%d: %d\r\n" % (random.randrange(1 << 30), time.time()))
                except OSError:
                    closed = True
            if closed:
                conns.remove(s)
                s.close()
                count("slowloris connections closed by the server")
        held = max(held, len(conns))
        with lock:
            stats["slowloris connections held (most, " + src + ")"] = held
    for s in conns:
        s.close()

def oversized(src):
    big = b"a" * (300 * 1024)
    body = b'{"name":"bench/x","description":"' + b"d" * (1 << 20) + b'"}'
    while time.time() < stop:
        for kind in ("header", "query", "json", "json-chunked"):
            try:
                s = connect(src)
            except OSError:
                count("oversized " + kind + " -> connect refused")
                time.sleep(0.1)
                continue
            try:
                if kind == "header":
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: tensorgate\r\nX-Big: " + big + b"\r\n\r\n")
                elif kind == "query":
                    s.sendall(b"GET /v1/models?q=" + big + b" HTTP/1.1\r\nHost: tensorgate\r\n\r\n")
                elif kind == "json":
                    s.sendall(b"POST /v1/models HTTP/1.1\r\nHost: tensorgate\r\nContent-Type: application/json\r\n"
                              b"Authorization: Bearer " + token.encode() +
                              b"\r\nContent-Length: %d\r\n\r\n" % len(body))
                    s.sendall(body)
                else:
                    s.sendall(b"POST /v1/models HTTP/1.1\r\nHost: tensorgate\r\nContent-Type: application/json\r\n"
                              b"Authorization: Bearer " + token.encode() +
                              b"\r\nTransfer-Encoding: chunked\r\n\r\n")
                    for i in range(0, len(body), 65536):
                        piece = body[i:i + 65536]
                        s.sendall(b"%x\r\n" % len(piece) + piece + b"\r\n")
                    s.sendall(b"0\r\n\r\n")
            except OSError:
                pass  # the server may answer and close before all of it is sent
            count("oversized " + kind + " -> " + status_of(s))
            s.close()
            time.sleep(0.05)

def refused_uploads(src, worker):
    pickle = bytes([0x80, 0x02, ord("}"), ord("q"), 0x00]) + b"X" * 65531
    n = 0
    while time.time() < stop:
        n += 1
        try:
            s = connect(src)
        except OSError:
            count("refused upload -> connect refused")
            time.sleep(0.1)
            continue
        try:
            s.sendall(b"PUT /v1/models/bench/m/versions/2/files/evil-%d-%d.bin HTTP/1.1\r\nHost: tensorgate\r\n"
                      b"Authorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n"
                      b"Content-Type: application/octet-stream\r\n\r\n" % (worker, n, token.encode()))
            for _ in range(128):  # 8 MiB
                s.sendall(b"%x\r\n" % len(pickle) + pickle + b"\r\n")
            s.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # answered early and closed
        count("refused upload -> " + status_of(s))
        s.close()

threads = [threading.Thread(target=slowloris, args=("127.0.0.2", 100)),
           threading.Thread(target=slowloris, args=("127.0.0.3", 100)),
           threading.Thread(target=oversized, args=("127.0.0.4",)),
           threading.Thread(target=refused_uploads, args=("127.0.0.5", 1)),
           threading.Thread(target=refused_uploads, args=("127.0.0.5", 2))]
for t in threads:
    t.daemon = True
    t.start()
for t in threads:
    t.join(seconds + 30)
print(json.dumps(stats, sort_keys=True))
EOF

# --- the sampler: "seconds-since-start rss_kib fds" every second
sample() {
    t0=$(date +%s)
    while kill -0 "$server_pid" 2>/dev/null; do
        rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$server_pid/status" 2>/dev/null || echo 0)
        fds=$(ls "/proc/$server_pid/fd" 2>/dev/null | wc -l)
        echo "$(($(date +%s) - t0)) $rss $fds"
        sleep 1
    done
}

echo "hostile clients beside wrk ($(nproc) cores; wrk -t2 -c64 ${seconds}s on a header GET and a 64 KiB tensor GET; server defaults: --max-per-ip 64, --max-connections 1024, --timeout 60)"
"$py" "$work/hostile.py" 127.0.0.1 "$port" "$token" $((seconds + 2 * lead)) >"$work/hostile.json" 2>"$work/hostile.err" &
hostile_pid=$!
sleep "$lead"
sample >"$work/samples" &
sampler_pid=$!
wrk -t 2 -c 64 -d "${seconds}s" --timeout 10s -s "$work/mix.lua" "$base/" >"$work/wrk.out" 2>&1 || true
kill "$sampler_pid" 2>/dev/null || true
sampler_pid=""
wait "$hostile_pid" 2>/dev/null || true
hostile_pid=""

requests=$(awk '/requests in/ { print $1 }' "$work/wrk.out")
rps=$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$work/wrk.out")
non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$work/wrk.out")
socket_errors=$(awk '/Socket errors:/ { gsub(",", ""); print $4 + $6 + $8 + $10 }' "$work/wrk.out")
timeouts=$(awk '/Socket errors:/ { gsub(",", ""); print $10 }' "$work/wrk.out")
if [ -z "$requests" ]; then
    echo "bench/hostile.sh: wrk did not run:" >&2
    cat "$work/wrk.out" >&2
    exit 2
fi
errors=$((${non2xx:-0} + ${socket_errors:-0}))
printf '%-44s %10s %-6s  (%s req/s)\n' "well-behaved requests (wrk, ${seconds}s)" "$requests" req "$rps"
printf '%-44s %10s %-6s  (non-2xx %s, socket errors %s of which timeouts %s; aim 0: %s)\n' \
    "well-behaved errors" "$errors" "" "${non2xx:-0}" "${socket_errors:-0}" "${timeouts:-0}" \
    "$([ "$errors" -eq 0 ] && echo met || echo NOT MET)"

# averages over the first and the last window of the wrk run
avg() { # avg COLUMN FROM TO -> mean of COLUMN over samples with FROM <= t < TO
    awk -v c="$1" -v a="$2" -v b="$3" '$1 >= a && $1 < b { s += $c; n++ } END { if (n) printf "%.0f", s / n; else print "n/a" }' "$work/samples"
}
rss_first=$(avg 2 0 "$window")
rss_last=$(avg 2 $((seconds - window)) "$seconds")
fd_first=$(avg 3 0 "$window")
fd_last=$(avg 3 $((seconds - window)) "$seconds")
rss_max=$(awk '{ if ($2 > m) m = $2 } END { print m + 0 }' "$work/samples")
fd_max=$(awk '{ if ($3 > m) m = $3 } END { print m + 0 }' "$work/samples")
printf '%-44s %10s %-6s  last %ss %s MiB (max %s MiB)\n' "server RSS, first ${window}s" \
    "$((rss_first / 1024))" MiB "$window" "$((rss_last / 1024))" "$((rss_max / 1024))"
printf '%-44s %10s %-6s  last %ss %s (max %s)\n' "server open descriptors, first ${window}s" \
    "$fd_first" fds "$window" "$fd_last" "$fd_max"
bench_result "hostile: server RSS, last ${window}s" "$((rss_last / 1024))" MiB "first ${window}s" "$((rss_first / 1024))"
bench_result "hostile: well-behaved req/s beside slowloris" "$rps" req/s "" ""
echo "hostile clients (what each got, counted over $((seconds + 2 * lead)) s):"
"$py" -c 'import json, sys
for k, v in sorted(json.load(open(sys.argv[1])).items()):
    print("  %-58s %8d" % (k, v))' "$work/hostile.json" || cat "$work/hostile.err" >&2
if [ -s "$work/hostile.err" ]; then
    echo "bench/hostile.sh: the hostile clients reported:" >&2
    tail -n 20 "$work/hostile.err" >&2
fi
kill -0 "$server_pid" 2>/dev/null || { echo "bench/hostile.sh: the server died" >&2; exit 2; }
