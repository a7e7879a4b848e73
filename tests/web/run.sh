#!/bin/sh
# tests/web/run.sh BINARY: the web page (web/, served at /) in a real browser:
# Debian's /usr/bin/chromium, headless, driven by playwright-core (pinned in
# tests/web/package-lock.json, installed with `npm ci` into tests/web/node_modules
# when missing) against a real server on a free port with a temp data directory.
# The checks are in tests/web/test.mjs; screenshots go to
# ${TG_TEST_LOGS:-build/test-logs}/web/. Ends with "N passed, N failed".
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
case $1 in
/*) BIN=$1 ;;
*) BIN=$(pwd)/$1 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
shots=${TG_TEST_LOGS:-$root/build/test-logs}/web
case $shots in /*) ;; *) shots=$root/$shots ;; esac
mkdir -p "$shots"
chromium=${CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$chromium" ]; then
    echo "FAIL: $chromium missing (scripts/install-deps.sh installs chromium)"
    echo "0 passed, 1 failed"
    exit 1
fi
if [ ! -d "$here/node_modules/playwright-core" ]; then
    (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) || {
        echo "FAIL: npm ci in tests/web"
        echo "0 passed, 1 failed"
        exit 1
    }
fi

W=$(mktemp -d "${TMPDIR:-/tmp}/tg-web.XXXXXX")
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT INT TERM
cd "$W" || exit 2

"$BIN" serve --listen 127.0.0.1:0 --data ./data >server.out 2>server.log &
pid=$!
port=
for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' server.log | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    echo "FAIL: the server did not start"
    cat server.log
    echo "0 passed, 1 failed"
    exit 1
fi
S=http://127.0.0.1:$port
WRITE=$("$BIN" token create --data ./data --scope write --namespace acme | tail -n 1)
ADMIN=$("$BIN" token create --data ./data --scope admin | tail -n 1)

# a model whose description is markup (it must stay text), a safetensors file with
# F32 (with a NaN and an Inf), F16 and I32 tensors, a config.json; a second model
# for the search; an alias; a model holding code; a refused pickle for the refusals
# view; a GGUF file
TG_GGUF_DIR=$root/tests/gguf /usr/bin/python3 - <<'PYEOF'
import json, struct, numpy as np
ts = {"model.embed.weight": np.array([[1, np.nan, np.inf, 2], [0, 1, 2, 3]], dtype=np.float32),
      "model.layers.0.weight": np.ones((8, 3), np.float16),
      "model.positions": np.arange(6, dtype=np.int32)}
h = {}; off = 0; blobs = []
for k, v in ts.items():
    d = {"float32": "F32", "float16": "F16", "int32": "I32"}[str(v.dtype)]
    h[k] = {"dtype": d, "shape": list(v.shape), "data_offsets": [off, off + v.nbytes]}
    off += v.nbytes; blobs.append(v.tobytes())
h["__metadata__"] = {"format": "pt"}
hb = json.dumps(h).encode(); hb += b" " * (-len(hb) % 8)
open("model.safetensors", "wb").write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
open("config.json", "w").write('{"hidden_size": 4}\n')
open("pickle.bin", "wb").write(b"\x80\x02}q\x00.")
# a GGUF file (tests/gguf/generate.py's writer): metadata with markup in a value and a
# 20-element array, an F32 and a Q8_0 tensor
import os, sys
sys.path.insert(0, os.environ["TG_GGUF_DIR"])
from generate import gguf, kv, ARCH, STRING, U32, ARRAY
kvs = [ARCH, kv("general.name", STRING, "<script>alert(1)</script> tiny"), kv("llama.context_length", U32, 2048),
       kv("tokenizer.ggml.tokens", ARRAY, (STRING, [f"t{i}" for i in range(20)]))]
open("tiny-Q8_0.gguf", "wb").write(gguf([("token_embd.weight", [4, 3], 0), ("blk.0.attn_k.weight", [64, 2], 8)], kvs=kvs))
# a second shard (layers 1 and 2) and the index that names both
ts2 = {"model.layers.1.weight": np.ones((2, 2), np.float32), "model.layers.1.bias": np.zeros(2, np.float32),
       "model.layers.2.weight": np.ones((3,), np.float16)}
h = {}; off = 0; blobs = []
for k, v in ts2.items():
    d = {"float32": "F32", "float16": "F16"}[str(v.dtype)]
    h[k] = {"dtype": d, "shape": list(v.shape), "data_offsets": [off, off + v.nbytes]}
    off += v.nbytes; blobs.append(v.tobytes())
hb = json.dumps(h).encode(); hb += b" " * (-len(hb) % 8)
open("model-2.safetensors", "wb").write(struct.pack("<Q", len(hb)) + hb + b"".join(blobs))
# a hostile model card: raw HTML, script, event handlers, javascript: and data: links,
# an image from elsewhere; and a relative link to a file of the version
card = """---
license: apache-2.0
tags:
- text-generation
- "<b>tag</b>"
---
# Tiny card

Some **bold** text and a [config link](config.json) and [site](https://example.org/x).

<script>alert('card')</script>
<img src=x onerror="alert('img')">
<a href="javascript:alert('raw')">raw link</a>

[js link](javascript:alert('md')) [vb](vbscript:msgbox) [data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)

![remote](http://example.invalid/x.png) ![pixel](data:image/png;base64,iVBORw0KGgo=)

<iframe src="https://example.org"></iframe>
<style>body{display:none}</style>

```python
print("code")
```
"""
open("README.md", "w").write(card)
# a huge card: 1.5 MiB (the server renders its first 128 KiB), markup past that
big = "---\nlicense: mit\n---\n# Huge\n\n" + ("lorem *ipsum* <b>x</b> [j](javascript:alert(1))\n" * 30000)
big += "<script>alert('late')</script>\n" * 1000
open("HUGE.md", "w").write(big)
PYEOF
H="Authorization: Bearer $WRITE"
set -e
curl -sf -o /dev/null -H "$H" -d '{"name":"acme/tiny","description":"<img src=x onerror=alert(1)> a tiny model"}' "$S/v1/models"
curl -sf -o /dev/null -H "$H" -d '{"name":"acme/other","description":"another"}' "$S/v1/models"
curl -sf -o /dev/null -H "$H" -X POST "$S/v1/models/acme/tiny/versions"
curl -sf -o /dev/null -H "$H" -T model.safetensors "$S/v1/models/acme/tiny/versions/1/files/model.safetensors"
curl -sf -o /dev/null -H "$H" -T config.json "$S/v1/models/acme/tiny/versions/1/files/config.json"
curl -sf -o /dev/null -H "$H" -T tiny-Q8_0.gguf "$S/v1/models/acme/tiny/versions/1/files/tiny-Q8_0.gguf"
curl -sf -o /dev/null -H "$H" -T model-2.safetensors "$S/v1/models/acme/tiny/versions/1/files/model-2.safetensors"
curl -sf -o /dev/null -H "$H" -T README.md "$S/v1/models/acme/tiny/versions/1/files/README.md"
curl -sf -o /dev/null -H "$H" -X POST "$S/v1/models/acme/tiny/versions/1/publish"
curl -sf -o /dev/null -H "$H" -X PUT -d '{"version":1}' "$S/v1/models/acme/tiny/aliases/prod"
# code allowed in acme (docs/DESIGN.md, "The code policy"): acme/coded holds code,
# marked on the page (before the pickle, which stays the newest refusal)
printf 'class X:\n    pass\n' >modeling_x.py
printf '{"auto_map": {"AutoModel": "modeling_x.X"}}' >coded-config.json
curl -sf -o /dev/null -H "Authorization: Bearer $ADMIN" -X PUT -d '{"allow_code":true}' "$S/v1/namespaces/acme/policy"
curl -sf -o /dev/null -H "$H" -d '{"name":"acme/coded","description":"with code"}' "$S/v1/models"
curl -sf -o /dev/null -H "$H" -X POST "$S/v1/models/acme/coded/versions"
curl -sf -o /dev/null -H "$H" -T modeling_x.py "$S/v1/models/acme/coded/versions/1/files/modeling_x.py"
curl -sf -o /dev/null -H "$H" -T coded-config.json "$S/v1/models/acme/coded/versions/1/files/config.json"
curl -sf -o /dev/null -H "$H" -X POST "$S/v1/models/acme/coded/versions/1/publish"
# a deprecated version (docs/MANUAL.md, "The life of a version"), marked on the page
curl -sf -o /dev/null -H "$H" -d '{"name":"acme/old"}' "$S/v1/models"
curl -sf -o /dev/null -H "$H" -X POST "$S/v1/models/acme/old/versions"
curl -sf -o /dev/null -H "$H" -T config.json "$S/v1/models/acme/old/versions/1/files/config.json"
curl -sf -o /dev/null -H "$H" -X POST "$S/v1/models/acme/old/versions/1/publish"
curl -sf -o /dev/null -H "$H" -X PUT -d '{"reason":"superseded"}' "$S/v1/models/acme/old/versions/1/deprecation"
curl -sf -o /dev/null -H "$H" -X POST "$S/v1/models/acme/tiny/versions"
curl -s -o /dev/null -H "$H" -T pickle.bin "$S/v1/models/acme/tiny/versions/2/files/model.safetensors"
# a huge card; 30 more models (the list has pages of 25); 55 more refusals (pages of 50)
curl -sf -o /dev/null -H "$H" -d '{"name":"acme/huge"}' "$S/v1/models"
curl -sf -o /dev/null -H "$H" -X POST "$S/v1/models/acme/huge/versions"
curl -sf -o /dev/null -H "$H" -T HUGE.md "$S/v1/models/acme/huge/versions/1/files/README.md"
for i in $(seq 10 39); do
    curl -sf -o /dev/null -H "$H" -d "{\"name\":\"acme/bulk-$i\"}" "$S/v1/models"
done
for i in $(seq 10 64); do
    curl -s -o /dev/null -H "$H" -T pickle.bin "$S/v1/models/acme/tiny/versions/2/files/p$i.safetensors"
done
set +e

S=$S ADMIN=$ADMIN SHOTS=$shots CHROMIUM=$chromium NODE_PATH=$here/node_modules \
    node "$here/test.mjs"
