#!/bin/sh
# tests/hf/python_client.sh BIN: the real huggingface_hub Python client against a
# tensorgate (BIN serve) started here on a free loopback port with a fresh data
# directory: publishes acme/hf-py (model.safetensors, config.json, a README.md with
# YAML front matter) and runs tests/hf/python_client.py once per client source tree,
# then tests/hf/python_write.py (writes through the gate) once per tree.
# The client is never vendored: TG_HF_HUB_SRC names source trees (colon-separated
# "<checkout>/src" folders, e.g. exported from git tags v0.36.0 and v1.0.0), else an
# installed huggingface_hub is used. Exits 77 when none can be imported (the caller
# skips), else 1 when a check failed. docs/HF_CLIENTS.md gives the manual procedure.
set -eu
bin=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
py=${TG_PYTHON:-/usr/bin/python3}
trees=""
for src in $(printf '%s' "${TG_HF_HUB_SRC:-}" | tr ':' ' '); do
    if PYTHONPATH="$src" "$py" -c 'import huggingface_hub' >/dev/null 2>&1; then
        trees="$trees $src"
    fi
done
if [ -z "$trees" ]; then
    if "$py" -c 'import huggingface_hub' >/dev/null 2>&1; then
        trees="installed"
    else
        echo "tests/hf: huggingface_hub cannot be imported (set TG_HF_HUB_SRC); skipping" >&2
        exit 77
    fi
fi
work=$(mktemp -d)
pid=""
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT INT TERM
cd "$work"
"$bin" serve --listen 127.0.0.1:0 --data ./data >server.out 2>server.log &
pid=$!
port=""
for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on .*:\([0-9][0-9]*\)$/\1/p' server.out server.log 2>/dev/null | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    echo "tests/hf: the server did not start" >&2
    cat server.log >&2
    exit 1
fi
url=http://127.0.0.1:$port
token=$("$bin" token create --data ./data --scope write --namespace acme 2>/dev/null | tail -n 1)
"$py" - <<'PY'
import json, struct
header = {"embed.weight": {"dtype": "F32", "shape": [4, 2], "data_offsets": [0, 32]},
          "__metadata__": {"format": "pt"}}
text = json.dumps(header).encode()
text += b" " * (-len(text) % 8)
with open("model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + bytes(range(32)))
with open("config.json", "w") as f:
    json.dump({"model_type": "tensorgate-test"}, f)
with open("README.md", "w") as f:
    f.write("---\nlicense: apache-2.0\ntags:\n- tensorgate\n---\n# hf-py\n")
PY
auth="Authorization: Bearer $token"
curl -sf -H "$auth" -d '{"name":"acme/hf-py"}' "$url/v1/models" >/dev/null
curl -sf -H "$auth" -d '{}' "$url/v1/models/acme/hf-py/versions" >/dev/null
for f in model.safetensors config.json README.md; do
    curl -sf -H "$auth" -T "$f" "$url/v1/models/acme/hf-py/versions/1/files/$f" >/dev/null
done
curl -sf -H "$auth" -X POST "$url/v1/models/acme/hf-py/versions/1/publish" >/dev/null
status=0
for tree in $trees; do
    if [ "$tree" = installed ]; then
        "$py" "$here/python_client.py" "$url" "$token" acme/hf-py || status=1
    else
        PYTHONPATH="$tree" "$py" "$here/python_client.py" "$url" "$token" acme/hf-py || status=1
    fi
done
# writes through the gate (tests/hf/python_write.py): a repository per client tree
admin=$("$bin" token create --data ./data --scope admin 2>/dev/null | tail -n 1)
n=0
for tree in $trees; do
    n=$((n + 1))
    pypath=$tree
    [ "$tree" = installed ] && pypath=""
    HF_ENDPOINT=$url HF_TOKEN=hf_$token TG_ADMIN_TOKEN=hf_$admin HF_HOME="$work/hf-home" \
        HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_PROGRESS_BARS=1 PYTHONPATH="$pypath" \
        "$py" "$here/python_write.py" "acme/py-write-$n" || status=1
done
exit $status
