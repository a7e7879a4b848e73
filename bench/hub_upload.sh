#!/bin/sh
# bench/hub_upload.sh [BUILD_DIR]: upload throughput through tensorgate's Hub API next
# to `tensorgate push` of the same files in the same run (anchor: push).
#   A folder of HUB_SHARDS safetensors shards (default 4 x 64 MiB = 256 MiB; BENCH_QUICK=1:
#   4 x 8 MiB = 32 MiB) with its index and config.json goes, `reps` times each and
#   interleaved, to a new model:
#     push:    `tensorgate push DIR bench/push-N --publish` (the whole process timed)
#     hub-js:  @huggingface/hub's createRepo + uploadFiles (tests/hf/node_modules, the
#              files as file-backed Blobs; timed inside node, its start-up excluded)
#     hub-py:  huggingface_hub's create_repo + upload_folder, only when HF_HUB_SRC names
#              a huggingface_hub source checkout (run as PYTHONPATH=$HF_HUB_SRC/src
#              /usr/bin/python3; timed inside Python, its imports excluded)
#   Before each upload 8 bytes of every shard's data change, so that no upload finds
#   its blobs stored already (the Hub's LFS batch would skip them); after each the model
#   is deleted (admin token), which removes its blobs. MB/s is 10^6 bytes of the folder
#   per second; best and median of the repetitions, the median recorded.
# Timing never fails anything: the script fails only when a step cannot run.
set -eu
cd "$(dirname "$0")/.."
. bench/results.sh
build=${1:-build}
bin=$(pwd)/$build/tensorgate
py=/usr/bin/python3
src=$(pwd)

if [ "${BENCH_QUICK:-0}" = 1 ]; then
    shards=${HUB_SHARDS:-4}
    mib=${HUB_SHARD_MIB:-8}
    reps=2
else
    shards=${HUB_SHARDS:-4}
    mib=${HUB_SHARD_MIB:-64}
    reps=3
fi
[ -x "$bin" ] || {
    echo "bench/hub_upload.sh: $bin is not built" >&2
    exit 2
}
have_js=0
if command -v node >/dev/null 2>&1 && [ -d tests/hf/node_modules/@huggingface/hub ]; then
    have_js=1
else
    echo "bench/hub_upload.sh: no node or tests/hf/node_modules (npm ci in tests/hf): hub-js skipped" >&2
fi
have_py=0
if [ -n "${HF_HUB_SRC:-}" ]; then
    if PYTHONPATH=$HF_HUB_SRC/src "$py" -c 'import huggingface_hub' 2>/dev/null; then
        have_py=1
    else
        echo "bench/hub_upload.sh: HF_HUB_SRC=$HF_HUB_SRC: huggingface_hub does not import" >&2
        exit 2
    fi
fi

work=$(mktemp -d /tmp/tg-bench-hub-XXXXXX)
server_pid=""
cleanup() {
    [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }
mbps() { awk -v b="$1" -v s="$2" 'BEGIN { if (s <= 0) s = 1e-9; printf "%.1f", b / s / 1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b <= 0) { print "n/a"; exit } printf "%.3gx", a / b }'; }
# best_median "f1 f2 ..." -> "best/median"
best_median() {
    # shellcheck disable=SC2086 # split the figures, one per line
    printf '%s\n' $1 | sort -g | awk '{ v[NR] = $1 } END {
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.1f/%.1f", v[NR], m }'
}
median_of() { echo "${1#*/}"; }

# --- the folder: shards of one F32 tensor each (random bytes), index, config
mkdir -p "$work/folder"
"$py" - "$work/folder" "$shards" "$mib" <<'EOF'
import json, os, struct, sys
folder, shards, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = mib * 1024 * 1024 // 4
weight_map = {}
for i in range(shards):
    name = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
    h = json.dumps({"layer%d" % i: {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}},
                   separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        left = 4 * n
        while left:
            k = min(left, 16 << 20)
            f.write(os.urandom(k))
            left -= k
    weight_map["layer%d" % i] = name
json.dump({"metadata": {"total_size": shards * 4 * n}, "weight_map": weight_map},
          open(os.path.join(folder, "model.safetensors.index.json"), "w"))
open(os.path.join(folder, "config.json"), "w").write('{"model_type": "bench"}\n')
EOF
bytes=$(du -cb "$work/folder"/* | tail -n 1 | cut -f1)

# mutate N: 8 bytes of each shard's data become N (a safetensors header ends at 8 +
# its length), so every upload sends bytes no blob holds yet
mutate() {
    "$py" - "$work/folder" "$1" <<'EOF'
import os, struct, sys
folder, n = sys.argv[1], int(sys.argv[2])
for name in sorted(os.listdir(folder)):
    if name.endswith(".safetensors"):
        with open(os.path.join(folder, name), "r+b") as f:
            (hlen,) = struct.unpack("<Q", f.read(8))
            f.seek(8 + hlen)
            f.write(struct.pack("<Q", n))
EOF
}

# --- the server on a free loopback port, a fresh data directory
"$bin" serve --listen 127.0.0.1:0 --data "$work/data" >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
# a server that does not start: its log on stderr, and this script exits 2
port=$(bench_server_port hub_upload.sh "$work/server.log" "$server_pid") || exit 2
base="http://127.0.0.1:$port"
write=$("$bin" token create --data "$work/data" --scope write --namespace bench 2>/dev/null | tail -n 1)
admin=$("$bin" token create --data "$work/data" --scope admin --namespace bench 2>/dev/null | tail -n 1)

drop() { # drop MODEL: delete it (and its blobs); the bench never times this
    code=$(curl -sS -o "$work/resp" -w '%{http_code}' -X DELETE \
        -H "Authorization: Bearer $admin" "$base/v1/models/$1")
    if [ "$code" != 204 ]; then
        echo "bench/hub_upload.sh: DELETE $1 -> $code: $(head -c 300 "$work/resp")" >&2
        exit 2
    fi
}
published() { # published MODEL: its latest version holds every file of the folder
    curl -sS -o "$work/resp" -H "Authorization: Bearer $write" "$base/v1/models/$1/versions/latest"
    "$py" - "$work/resp" "$work/folder" <<'EOF' || exit 2
import json, os, sys
v = json.load(open(sys.argv[1]))
want = {n: os.path.getsize(os.path.join(sys.argv[2], n)) for n in os.listdir(sys.argv[2])}
got = {f["path"]: f["size"] for f in v.get("files", [])}
if v.get("state") != "published" or got != want:
    sys.exit("bench/hub_upload.sh: the stored version differs: %s" % json.dumps(v)[:300])
EOF
}

# --- the Hub clients: one upload each, the seconds it took on stdout
ln -s "$src/tests/hf/node_modules" "$work/node_modules"
cat >"$work/upload.mjs" <<'EOF'
// node upload.mjs HUB_URL TOKEN REPO FOLDER: createRepo + uploadFiles, seconds on stdout
import { openAsBlob, readdirSync } from "node:fs";
import { createRepo, uploadFiles } from "@huggingface/hub";
const [hubUrl, accessToken, repo, folder] = process.argv.slice(2);
const files = [];
for (const name of readdirSync(folder).sort())
  files.push({ path: name, content: await openAsBlob(`${folder}/${name}`) });
const t0 = performance.now();
await createRepo({ repo, accessToken, hubUrl });
await uploadFiles({ repo, accessToken, hubUrl, files, commitTitle: "bench" });
console.log(((performance.now() - t0) / 1000).toFixed(6));
EOF
cat >"$work/upload.py" <<'EOF'
# upload.py REPO FOLDER: create_repo + upload_folder (HF_ENDPOINT, HF_TOKEN), seconds
import sys, time
from huggingface_hub import HfApi
api = HfApi()
t0 = time.monotonic()
api.create_repo(sys.argv[1])
api.upload_folder(repo_id=sys.argv[1], folder_path=sys.argv[2], commit_message="bench")
print("%.6f" % (time.monotonic() - t0))
EOF

echo "Hub upload benchmarks ($(nproc) cores; $shards shards x $mib MiB + index + config = $bytes bytes; best/median MB/s of $reps, interleaved)"
push_f=""
js_f=""
py_f=""
n=0
r=0
while [ $r -lt "$reps" ]; do
    n=$((n + 1))
    mutate $n
    t0=$(now)
    TENSORGATE_URL=$base TENSORGATE_TOKEN=$write "$bin" push "$work/folder" "bench/push-$r" \
        --publish >"$work/push.out" 2>&1 || {
        echo "bench/hub_upload.sh: tensorgate push failed:" >&2
        cat "$work/push.out" >&2
        exit 2
    }
    t1=$(now)
    published "bench/push-$r"
    push_f="$push_f $(mbps "$bytes" "$(elapsed "$t0" "$t1")")"
    drop "bench/push-$r"
    if [ $have_js = 1 ]; then
        n=$((n + 1))
        mutate $n
        secs=$(cd "$work" && node upload.mjs "$base" "hf_$write" "bench/js-$r" "$work/folder" 2>"$work/js.err") || {
            echo "bench/hub_upload.sh: @huggingface/hub uploadFiles failed:" >&2
            cat "$work/js.err" >&2
            exit 2
        }
        published "bench/js-$r"
        js_f="$js_f $(mbps "$bytes" "$secs")"
        drop "bench/js-$r"
    fi
    if [ $have_py = 1 ]; then
        n=$((n + 1))
        mutate $n
        secs=$(HF_ENDPOINT=$base HF_TOKEN="hf_$write" HF_HOME="$work/hf-home" \
            HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_PROGRESS_BARS=1 HF_HUB_DISABLE_XET=1 \
            PYTHONPATH="$HF_HUB_SRC/src" "$py" "$work/upload.py" "bench/py-$r" "$work/folder" \
            2>"$work/py.err" | tail -n 1) || true
        case $secs in
        [0-9]*) ;;
        *)
            echo "bench/hub_upload.sh: huggingface_hub upload_folder failed:" >&2
            tail -n 20 "$work/py.err" >&2
            exit 2
            ;;
        esac
        published "bench/py-$r"
        py_f="$py_f $(mbps "$bytes" "$secs")"
        drop "bench/py-$r"
    fi
    r=$((r + 1))
done

push_bm=$(best_median "$push_f")
line() { # line NAME BEST/MEDIAN
    printf '%-50s %14s MB/s  anchor %-16s %14s MB/s  ratio %s\n' "$1" "$2" "tensorgate push" \
        "$push_bm" "$(ratio "$(median_of "$2")" "$(median_of "$push_bm")")"
    bench_result "$1" "$(median_of "$2")" MB/s "tensorgate push" "$(median_of "$push_bm")"
}
line "tensorgate push $((bytes / 1048576)) MiB folder" "$push_bm"
if [ $have_js = 1 ]; then
    line "@huggingface/hub uploadFiles same folder" "$(best_median "$js_f")"
fi
if [ $have_py = 1 ]; then
    v=$(PYTHONPATH=$HF_HUB_SRC/src "$py" -c 'import huggingface_hub; print(huggingface_hub.__version__)')
    line "huggingface_hub $v upload_folder same folder" "$(best_median "$py_f")"
else
    echo "(huggingface_hub upload_folder: set HF_HUB_SRC to a huggingface_hub checkout to measure it)"
fi
