#!/bin/sh
# bench/convert_version.sh [BUILD_DIR]: derived-version conversion of a 2 GiB F32
# model (two 1 GiB shards + index + config.json) to BF16 through the server
# (POST .../convert, poll GET /v1/jobs/{id} until done), next to /usr/bin/python3
# torch doing the same work on the same files in the same run: read the bytes by
# hand (the safetensors package is not installed), torch.frombuffer, .to(bfloat16),
# write header + data and fsync (the server fsyncs its blobs too).
# BENCH_QUICK=1 uses 256 MiB. BENCH_DIR picks the scratch directory (default: a
# temp dir under /var/tmp, on disk rather than tmpfs). Timing is reported, never judged.
set -eu
cd "$(dirname "$0")/.."
. bench/results.sh
build=${1:-build}
bin=$build/tensorgate
[ -x "$bin" ] || { echo "convert_version: $bin is not built" >&2; exit 1; }
py=/usr/bin/python3
shard_mib=1024
[ "${BENCH_QUICK:-0}" = 1 ] && shard_mib=128
dir=${BENCH_DIR:-$(mktemp -d /var/tmp/tg-bench-convert-XXXXXX)}
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    [ -z "${BENCH_DIR:-}" ] && rm -rf "$dir"
}
trap cleanup EXIT INT TERM
mkdir -p "$dir/model" "$dir/data"

# the model: normal F32 values, written in 64 MiB pieces
"$py" - "$dir/model" "$shard_mib" <<'EOF'
import json, struct, sys
import numpy as np
out, mib = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(1)
rows = mib * (1 << 20) // 4 // 4096
weight_map, total = {}, 0
for s in (1, 2):
    name = f"model-0000{s}-of-00002.safetensors"
    tensors, off, header = 8, 0, {"__metadata__": {"format": "pt"}}
    for t in range(tensors):
        n = rows // tensors * 4096 * 4
        header[f"layers.{s}.{t}.weight"] = {"dtype": "F32", "shape": [rows // tensors, 4096],
                                            "data_offsets": [off, off + n]}
        weight_map[f"layers.{s}.{t}.weight"] = name
        off += n
    total += off
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(f"{out}/{name}", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        left = off // 4
        while left:
            k = min(left, 16 << 20)
            f.write(rng.standard_normal(k, dtype=np.float32).tobytes())
            left -= k
with open(f"{out}/model.safetensors.index.json", "w") as f:
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
with open(f"{out}/config.json", "w") as f:
    f.write('{"architectures": ["Bench"]}\n')
EOF

"$bin" serve --listen 127.0.0.1:0 --data "$dir/data" 2>"$dir/server.log" &
server_pid=$!
port=
for _ in $(seq 1 200); do
    port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' "$dir/server.log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.05
done
[ -n "$port" ] || { echo "convert_version: the server did not start" >&2; cat "$dir/server.log" >&2; exit 1; }
# the token once the server has made the data directory (token create needs its catalog)
token=$("$bin" token create --data "$dir/data" --scope admin 2>/dev/null | tail -n 1)
base=http://127.0.0.1:$port/v1/models
auth="Authorization: Bearer $token"
curl -sf -H "$auth" -X POST "$base" -d '{"name":"bench/convert"}' >/dev/null
curl -sf -H "$auth" -X POST "$base/bench/convert/versions" >/dev/null
for f in "$dir"/model/*; do
    curl -sf -H "$auth" -H "Expect:" -T "$f" "$base/bench/convert/versions/1/files/$(basename "$f")" >/dev/null
done
curl -sf -H "$auth" -X POST "$base/bench/convert/versions/1/publish" >/dev/null

now() { date +%s.%N; }
start=$(now)
job=$(curl -sf -H "$auth" -X POST "$base/bench/convert/versions/1/convert" \
    -d '{"dtype":"BF16","tensors":["*.weight"]}' | sed -n 's/.*"url":"\([^"]*\)".*/\1/p')
state=
while :; do
    state=$(curl -sf "http://127.0.0.1:$port$job" | sed -n 's/.*"state":"\([a-z]*\)".*/\1/p')
    [ "$state" = done ] || [ "$state" = failed ] && break
    sleep 0.02
done
end=$(now)
[ "$state" = done ] || { echo "convert_version: the job failed" >&2; curl -s "http://127.0.0.1:$port$job" >&2; exit 1; }
server_s=$(echo "$end - $start" | bc -l)

torch_s=$("$py" - "$dir/model" "$dir/torch-out" <<'EOF'
import json, os, struct, sys, time, warnings
import torch
src, dst = sys.argv[1], sys.argv[2]
warnings.filterwarnings("ignore", message="The given buffer is not writable")
os.makedirs(dst, exist_ok=True)
start = time.perf_counter()
for name in sorted(os.listdir(src)):
    if not name.endswith(".safetensors"):
        continue
    with open(f"{src}/{name}", "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = memoryview(data)[8 + n :]
    out_header, parts, off = {}, [], 0
    if "__metadata__" in header:
        out_header["__metadata__"] = header.pop("__metadata__")
    for key, t in header.items():
        b, e = t["data_offsets"]
        x = torch.frombuffer(body[b:e], dtype=torch.float32).to(torch.bfloat16)
        raw = x.view(torch.int16).numpy().tobytes()
        out_header[key] = {"dtype": "BF16", "shape": t["shape"], "data_offsets": [off, off + len(raw)]}
        parts.append(raw)
        off += len(raw)
    text = json.dumps(out_header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(f"{dst}/{name}", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for raw in parts:
            f.write(raw)
        f.flush()
        os.fsync(f.fileno())
print(f"{time.perf_counter() - start:.3f}")
EOF
)
gib=$(echo "2 * $shard_mib / 1024" | bc -l)
printf 'convert_version: %.2f GiB F32 -> BF16 derived version (2 shards + index): server job %.2f s (%.2f GB/s of input); python3 torch read+.to()+write+fsync %.2f s; torch/server %.2fx\n' \
    "$gib" "$server_s" "$(echo "$gib * 1.073741824 / $server_s" | bc -l)" "$torch_s" "$(echo "$torch_s / $server_s" | bc -l)"
bench_result "derived version F32->BF16 (server job)" "$(echo "$gib * 1.073741824 / $server_s" | bc -l)" GB/s \
    "python3 torch read+.to()+write+fsync" "$(echo "$gib * 1.073741824 / $torch_s" | bc -l)"
