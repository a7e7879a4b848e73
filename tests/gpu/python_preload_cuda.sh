#!/bin/sh
# tests/gpu/python_preload_cuda.sh [BUILD_DIR]: the device check of
# tensorgate.preload on a real GPU (run by hand where a GPU is lent; not part of
# `make test`; about 1-3 minutes, capped at 280 s). On cuda:0 it:
#   1. publishes a model of 16 F32 tensors of 64 MiB (1 GiB; PRELOAD_CUDA_MIB to
#      change) and preloads it to cuda:0 (the server's CUDA backend);
#   2. in /usr/bin/python3: attaches with the real CudaDriver (ctypes on
#      libcuda.so.1), checks every tensor bit for bit against the same file read
#      from disk and copied to the GPU by torch, checks close() is refused while a
#      tensor lives and the lease ends after, and that a kernel writing into the
#      read-only mapping fails (in a child process: it poisons its CUDA context);
#   3. prints the preload's bandwidth (the server's "gbps": file to device) next to
#      the anchor, pinned host-to-device copies of the same bytes by torch
#      (cudaMemcpyAsync from pinned memory, best of 3), with the ratio; the goal is
#      >= 0.9x. Also attach + first tensor readable (ms).
# Prints "ok"/"FAIL" lines and "N passed, N failed"; exits 0 with "skipped: ..."
# where there is no GPU, no torch CUDA or a server built without cuda.h.
set -u
cd "$(dirname "$0")/../.." || exit 2
build=${1:-build}
bin=$build/tensorgate
py=${PYTHON:-/usr/bin/python3}
mib=${PRELOAD_CUDA_MIB:-1024}
[ -x "$bin" ] || { echo "tests/gpu/python_preload_cuda.sh: $bin is not built" >&2; exit 2; }
if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "skipped: torch in $py sees no CUDA device"
    exit 0
fi

work=$(mktemp -d /tmp/tg-gpu-pypre-XXXXXX)
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

"$bin" serve --listen 127.0.0.1:0 --data "$work/data" 2>"$work/server.log" &
server_pid=$!
port=""
for _ in $(seq 1 300); do
    port=$(sed -n 's|.*tensorgate: listening on http://[^:]*:\([0-9]*\).*|\1|p' "$work/server.log" | tail -n 1)
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.05
done
[ -n "$port" ] || { echo "the server did not start:"; cat "$work/server.log"; exit 2; }
token=$("$bin" token create --data "$work/data" --scope write --namespace gpu 2>/dev/null | tail -n 1)

PYTHONPATH=clients/python PYTHONDONTWRITEBYTECODE=1 timeout 280 "$py" - "http://127.0.0.1:$port" "$token" \
    "$work/data/preload.sock" "$work/model.safetensors" "$mib" <<'EOF'
import json, os, struct, subprocess, sys, time, urllib.request
import numpy as np
import torch
from tensorgate.preload import PreloadInUse, attach

base, token, sock, path, mib = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
passed = failed = 0
def check(name, cond, info=""):
    global passed, failed
    passed, failed = passed + bool(cond), failed + (not cond)
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f" {info}"), flush=True)

def http(method, p, body=None, ctype="application/json"):
    req = urllib.request.Request(base + p, data=body, method=method)
    req.add_header("Authorization", "Bearer " + token)
    if body is not None:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req) as r:
            data = r.read()
            return r.status, json.loads(data) if data else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")

status, ready = http("GET", "/readyz")
gpu = (ready or {}).get("gpu") or {}
if not gpu.get("available"):
    print(f"skipped: the server has no CUDA device: {gpu.get('reason')}")
    sys.exit(0)

n = max(1, mib // 64)
size = 16384 * 1024 * 4  # F32 [16384, 1024] = 64 MiB
header = {f"t{i:02d}": {"dtype": "F32", "shape": [16384, 1024], "data_offsets": [i * size, (i + 1) * size]} for i in range(n)}
h = json.dumps(header).encode(); h += b" " * (-len(h) % 8)
rng = np.random.default_rng(1)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    for i in range(n):
        f.write(rng.standard_normal(16384 * 1024, dtype=np.float32).tobytes())
http("POST", "/v1/models", json.dumps({"name": "gpu/pre"}).encode())
http("POST", "/v1/models/gpu/pre/versions", b"")
with open(path, "rb") as f:
    st, _ = http("PUT", "/v1/models/gpu/pre/versions/1/files/model.safetensors", f.read(), "application/octet-stream")
check("upload", st == 201, st)
http("POST", "/v1/models/gpu/pre/versions/1/publish", b"")
st, r = http("POST", "/v1/preloads", json.dumps({"model": "gpu/pre", "device": "cuda:0"}).encode())
check("POST /v1/preloads cuda:0", st == 202, f"{st} {r}")
pid = r["id"]
for _ in range(1200):
    _, g = http("GET", f"/v1/preloads/{pid}")
    if g["state"] in ("resident", "failed"):
        break
    time.sleep(0.1)
check("resident", g["state"] == "resident", g)
preload_gbps = g["gbps"]

t0 = time.perf_counter()
p = attach(sock, pid, token)
first = p.torch(p.keys()[0]); float(first[0, 0])
attach_ms = (time.perf_counter() - t0) * 1e3
check("on cuda:0", first.device.type == "cuda" and p.device == "cuda:0", f"{first.device} {p.device}")
# bit for bit against the file read here and copied to the GPU by torch
blob = np.fromfile(path, dtype=np.uint8)
(hl,) = struct.unpack("<Q", blob[:8].tobytes())
data = torch.from_numpy(blob[8 + hl:].view(np.float32).copy()).cuda()
ok = 0
for i, name in enumerate(p.keys()):
    t = p.torch(name)
    ref = data[i * 16384 * 1024:(i + 1) * 16384 * 1024].view(16384, 1024)
    ok += bool(torch.equal(t.view(torch.int32), ref.view(torch.int32)))
    del t
check(f"every tensor equal to the file ({ok} of {n})", ok == n)
del data
try:
    p.close(); check("close refused while a tensor lives", False)
except PreloadInUse:
    check("close refused while a tensor lives", True)
del first
p.close()
for _ in range(200):
    _, g = http("GET", f"/v1/preloads/{pid}")
    if g["leases"] == 0:
        break
    time.sleep(0.05)
check("lease ended after close", g["leases"] == 0, g)

# a kernel writing into the read-only mapping fails (child: it poisons its context)
code = ("import sys, torch\nfrom tensorgate.preload import attach\n"
        "p = attach(sys.argv[1], sys.argv[2], sys.argv[3]); t = p.torch(p.keys()[0])\n"
        "t.fill_(0.0); torch.cuda.synchronize(); print('wrote')\n")
r = subprocess.run([sys.executable, "-c", code, sock, pid, token], capture_output=True, text=True, timeout=120)
check("a write into the read-only mapping fails", "wrote" not in r.stdout, r.stdout + r.stderr[-300:])

# the anchor: pinned host-to-device copies of the same bytes
total = n * size
host = torch.empty(total // 4, dtype=torch.float32, pin_memory=True)
dev = torch.empty(total // 4, dtype=torch.float32, device="cuda")
best = 0.0
for _ in range(3):
    torch.cuda.synchronize(); t0 = time.perf_counter()
    dev.copy_(host, non_blocking=True); torch.cuda.synchronize()
    best = max(best, total / (time.perf_counter() - t0) / 1e9)
ratio = preload_gbps / best if best else 0.0
print(f"preload to cuda:0 ({total >> 20} MiB): {preload_gbps:.2f} GB/s  anchor pinned H2D copy (torch, best of 3) {best:.2f} GB/s  ratio {ratio:.3f}x (goal >= 0.9x)")
print(f"attach + first tensor readable (cuda:0, {total >> 20} MiB): {attach_ms:.2f} ms")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
EOF
rc=$?
[ "$rc" -eq 0 ] || tail -n 20 "$work/server.log"
exit "$rc"
