#!/bin/sh
# bench/python_load.sh BUILD_DIR: the Python client's load_file of a whole version
# (tensorgate.numpy.load_file, tensorgate.torch.load_file) next to `tensorgate pull`
# of the same files from the same server in the same run (the anchor).
#   A sharded model of 4 files, 256 MiB in all (BENCH_QUICK=1: 32 MiB), tensors of
#   F32, F16 and BF16 in turn (random bytes) for torch, and its twin with I16 in
#   place of BF16 for NumPy (which has no bfloat16), pushed with `tensorgate push`;
#   each side's anchor is the pull of its own model.
#   pull: into an empty directory each time (SHA-256 checked, renamed from .part).
#   numpy / torch: load_file of the version URL, each in a fresh Python process
#   (as a program loading a model: a new heap), timed after the imports (torch's
#   is not counted), every byte of the last one compared with the pushed files
#   after the timing. Median of 3 on each side.
# The client uses the server's bundle route (one request for the whole version)
# where the server has it, else one whole-file request per file; the line says
# which. Timing never fails anything: the script fails only when a step cannot run.
set -eu
cd "$(dirname "$0")/.."
. bench/results.sh
build=${1:-build}
bin=$(pwd)/$build/tensorgate
py=/usr/bin/python3

if [ "${BENCH_QUICK:-0}" = 1 ]; then
    mb=${PYLOAD_MB:-32}
else
    mb=${PYLOAD_MB:-256}
fi
reps=3
files=4

work=$(mktemp -d /tmp/tg-bench-pyload-XXXXXX)
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

"$bin" serve --listen 127.0.0.1:0 --data "$work/data" >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
# a server that does not start: its log on stderr, and this script exits 2
port=$(bench_server_port python_load.sh "$work/server.log" "$server_pid") || exit 2
export TENSORGATE_URL="http://127.0.0.1:$port"
TENSORGATE_TOKEN=$("$bin" token create --data "$work/data" --scope write 2>/dev/null | tail -n 1)
export TENSORGATE_TOKEN

# make_model DIR THIRD_DTYPE: the shards, tensors of 1 MiB .. 4 MiB, F32 / F16 /
# THIRD_DTYPE in turn, random bytes
make_model() {
    mkdir -p "$1"
    "$py" - "$1" "$files" "$mb" "$2" <<'EOF'
import json, os, struct, sys
d, files, mb, third = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
per_file = (mb << 20) // files
dtypes = [("F32", 4), ("F16", 2), (third, 2)]
k = 0
for i in range(files):
    header, off, sizes = {}, 0, []
    while off < per_file:
        dt, w = dtypes[k % 3]
        n = min((1 + k % 4) << 20, per_file - off)
        n -= n % 1024
        if n <= 0:
            break
        header["layers.%d.w" % k] = {"dtype": dt, "shape": [n // w // 256, 256], "data_offsets": [off, off + n]}
        sizes.append(n)
        off += n
        k += 1
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(d, "model-%05d-of-%05d.safetensors" % (i + 1, files)), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for n in sizes:
            f.write(os.urandom(n))
EOF
}
make_model "$work/pt" BF16
make_model "$work/np" I16
"$bin" push "$work/pt" bench/pyload-pt --publish >/dev/null 2>&1
"$bin" push "$work/np" bench/pyload-np --publish >/dev/null 2>&1
total=$(cat "$work"/pt/*.safetensors | wc -c)

now() { date +%s.%N; }
# pull_median MODEL DIR: the median seconds of reps pulls into an empty directory
pull_median() {
    pulls=""
    i=0
    while [ "$i" -lt "$reps" ]; do
        rm -rf "$work/pull"
        sync
        t0=$(now)
        "$bin" pull "$1" "$work/pull" >/dev/null 2>&1
        t1=$(now)
        pulls="$pulls $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')"
        i=$((i + 1))
    done
    for f in "$2"/*.safetensors; do
        cmp -s "$f" "$work/pull/$(basename "$f")" || {
            echo "bench/python_load.sh: pulled $(basename "$f") differs" >&2
            exit 2
        }
    done
    rm -rf "$work/pull"
    echo "$pulls" | tr ' ' '\n' | sed '/^$/d' | sort -n | sed -n 2p
}
pull_pt=$(pull_median bench/pyload-pt "$work/pt")
pull_np=$(pull_median bench/pyload-np "$work/np")

# load.py FRAMEWORK URL [SRC_DIR]: one load_file in a fresh Python process (as a
# program loading a model does: its heap new), timed after the imports; prints
# "seconds route"; with SRC_DIR, every byte is then compared with the files there
cat >"$work/load.py" <<'EOF'
import glob, json, os, struct, sys, time
sys.path.insert(0, os.path.join(os.getcwd(), "clients", "python"))
import numpy as np
import torch
import tensorgate
import tensorgate.numpy
import tensorgate.torch

fw, url = sys.argv[1], sys.argv[2]
load = tensorgate.numpy.load_file if fw == "numpy" else tensorgate.torch.load_file
t0 = time.perf_counter()
d = load(url)
secs = time.perf_counter() - t0
with tensorgate.safe_open(url, framework="np" if fw == "numpy" else "pt") as f:  # was it the bundle route?
    f.get_tensors(f.keys()[:1])
    route = "bundle" if f.bundle else "per-file"
if len(sys.argv) > 3:
    ref = {}
    for path in sorted(glob.glob(os.path.join(sys.argv[3], "*.safetensors"))):
        with open(path, "rb") as fh:
            data = fh.read()
        (n,) = struct.unpack("<Q", data[:8])
        for name, info in json.loads(data[8:8 + n]).items():
            b, e = info["data_offsets"]
            ref[name] = data[8 + n + b:8 + n + e]
    ok = set(d) == set(ref)
    for name, t in d.items():
        raw = t.reshape(-1).view(np.uint8) if fw == "numpy" else t.reshape(-1).view(torch.uint8).numpy()
        ok = ok and raw.tobytes() == ref[name]
    if not ok:
        sys.exit(f"bench/python_load.sh: {fw}.load_file returned other bytes than the files hold")
print(secs, route)
EOF
: >"$work/py.out"
for fw in numpy torch; do
    kind=pt
    [ "$fw" = numpy ] && kind=np
    times=""
    i=0
    while [ "$i" -lt "$reps" ]; do
        i=$((i + 1))
        check=
        [ "$i" = "$reps" ] && check=$work/$kind
        # shellcheck disable=SC2086
        out=$("$py" "$work/load.py" "$fw" "$TENSORGATE_URL/bench/pyload-$kind@latest" $check)
        times="$times ${out% *}"
        route=${out#* }
    done
    echo "$fw $(echo "$times" | tr ' ' '\n' | sed '/^$/d' | sort -n | sed -n 2p) $route" >>"$work/py.out"
done
rate() { awk -v b="$1" -v s="$2" 'BEGIN { if (s <= 0) s = 1e-9; printf "%.3f", b / s / 1e9 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b <= 0) { print "n/a"; exit } printf "%.3gx", a / b }'; }
while read -r fw secs route; do
    name="python $fw.load_file $files x $((mb / files)) MiB ($route)"
    pull_s=$pull_pt
    [ "$fw" = numpy ] && pull_s=$pull_np
    printf '%-52s %8s %-5s  anchor %-26s %8s %-5s  ratio %s\n' \
        "$name" "$(rate "$total" "$secs")" "GB/s" "tensorgate pull, median" "$(rate "$total" "$pull_s")" "GB/s" \
        "$(ratio "$pull_s" "$secs")"
    bench_result "$name" "$(rate "$total" "$secs")" GB/s "tensorgate pull, median" "$(rate "$total" "$pull_s")" \
        "$(ratio "$pull_s" "$secs")"
done <"$work/py.out"
