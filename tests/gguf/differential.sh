#!/bin/sh
# The differential run (docs/DESIGN.md, "GGUF"): every *.gguf of DIR through the gate
# (`BINARY validate --json --sidecar`) and through @huggingface/gguf (node, the version
# pinned in tests/gguf/package-lock.json, installed by `npm ci`). Fails when a file the
# npm parser cannot parse is admitted by the gate (as GGUF; a text sidecar such as the
# four bytes "GGUF" is not GGUF to the gate), when both accept a file but count its
# tensors differently, or when the gate refuses a file the npm parser reads for a reason
# not in STRICTER below (each one is explained in docs/DESIGN.md).
#   tests/gguf/differential.sh BINARY DIR
# Prints the counts and "gguf differential: N passed, N failed".
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 BINARY DIR" >&2
    exit 2
fi
bin=$1
dir=$2
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$here/node_modules/@huggingface/gguf" ]; then
    if ! command -v npm >/dev/null 2>&1 ||
        ! (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1); then
        echo "tests/gguf: cannot install @huggingface/gguf (npm ci failed; is the npm registry reachable?)" >&2
        exit 1
    fi
fi
out=$(mktemp -d "${TMPDIR:-/tmp}/tg-gguf-diff.XXXXXX")
trap 'rm -rf "$out"' EXIT INT TERM
node "$here/differential.mjs" "$dir" >"$out/npm.jsonl" || exit 1
find "$dir" -maxdepth 1 -name '*.gguf' | sort >"$out/files"
xargs "$bin" validate --json --sidecar <"$out/files" >"$out/gate.jsonl"
python3 - "$out/npm.jsonl" "$out/gate.jsonl" <<'PYEOF'
import json, os, sys
# Reasons for which the gate is stricter than @huggingface/gguf by design
# (docs/DESIGN.md, "GGUF", "Where the gate is stricter")
STRICTER = {
    "gguf_version", "gguf_count", "gguf_truncated", "gguf_key", "gguf_string", "gguf_utf8",
    "gguf_array", "gguf_bool", "gguf_duplicate_key", "gguf_alignment", "gguf_architecture",
    "gguf_tensor_name", "gguf_duplicate_tensor", "gguf_dims", "gguf_shape", "gguf_ggml_type",
    "gguf_block", "gguf_size_overflow", "gguf_offset", "gguf_overlap", "gguf_data_hole",
    "gguf_data_truncated", "gguf_trailing", "gguf_padding", "gguf_header_too_large",
}
npm = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    npm[r["name"]] = r
gate = {}
for line in open(sys.argv[2]):
    v = json.loads(line)
    gate[os.path.basename(v["file"])[:-5]] = v
passed = failed = 0
both = gate_only = npm_only = neither = as_text = 0
stricter = {}
for name, n in sorted(npm.items()):
    g = gate.get(name)
    if g is None:
        failed += 1
        print(f"FAIL {name}: no gate verdict")
        continue
    if not n["parsed"] and g["valid"] and g["format"] in ("text", "json"):
        # not GGUF to the gate (fewer than 8 bytes, or a text head such as "GGUF models"):
        # an admitted text sidecar, which no GGUF reader is asked to load
        passed += 1
        as_text += 1
    elif not n["parsed"] and g["valid"]:
        failed += 1
        npm_only += 1
        print(f"FAIL {name}: admitted by the gate, refused by @huggingface/gguf: {n['error']}")
    elif n["parsed"] and g["valid"]:
        both += 1
        if g["format"] != "gguf":
            failed += 1
            print(f"FAIL {name}: npm reads it, the gate admits it as {g['format']}")
        else:
            passed += 1
    elif n["parsed"]:
        gate_only += 1
        stricter[g["reason"]] = stricter.get(g["reason"], 0) + 1
        if g["reason"] in STRICTER or g["format"] != "gguf":
            passed += 1
        else:
            failed += 1
            print(f"FAIL {name}: refused as {g['reason']}, read by @huggingface/gguf (unexplained)")
    else:
        neither += 1
        passed += 1
print(f"gguf differential: {len(npm)} files: both accept {both}, both refuse {neither}, "
      f"only the gate refuses {gate_only}, only @huggingface/gguf refuses {npm_only}"
      + (f", text to the gate {as_text}" if as_text else ""))
if stricter:
    print("  gate-only refusals by reason: " +
          ", ".join(f"{k} {v}" for k, v in sorted(stricter.items())))
print(f"gguf differential: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PYEOF
