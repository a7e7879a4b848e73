#!/bin/sh
# The GGUF corpus (docs/DESIGN.md, "GGUF"): generate.py writes valid files and named
# malformed classes; each goes through `BINARY validate --json` (whole file) and
# `validate --sidecar --json` (an upload's judgement of a file not named *.safetensors),
# and through standard input in one read ("-"), and its reason is compared with the
# expected one. With node and npm, tests/gguf/differential.sh then runs the corpus through
# @huggingface/gguf. An upload over HTTP of a valid and of a refused file is
# tests/gguf/upload.py against a real server; serving an admitted file (header,
# tensors, slices, conversions, the Hub's gguf field) is tests/gguf/serve.py.
#   tests/gguf/run.sh build/tensorgate
# Prints one line per mismatch and "gguf: N passed, N failed"; exit 1 on any failure.
set -u
if [ $# -ne 1 ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tg-gguf.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
python3 "$here/generate.py" "$tmp/corpus" || { echo "gguf: generate.py failed"; exit 1; }

python3 - "$bin" "$tmp/corpus" <<'PYEOF' || exit 1
import json, os, subprocess, sys
binary, corpus = sys.argv[1], sys.argv[2]
rows = [l.rstrip("\n").split("\t") for l in open(os.path.join(corpus, "expected.tsv"))]
passed = failed = 0
def verdicts(args):
    files = [os.path.join(corpus, n + ".gguf") for n, _ in rows]
    p = subprocess.run([binary, "validate", "--json"] + args + files, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        print(f"validate exited {p.returncode}: {p.stderr.strip()}")
        sys.exit(1)
    return [json.loads(l) for l in p.stdout.splitlines()]
for mode in ([], ["--sidecar"]):
    for (name, expect), v in zip(rows, verdicts(mode)):
        if mode and expect == "refused_format":
            expect = "sidecar_text_invalid"  # not GGUF: a sidecar is judged as text
        got = "valid" if v["valid"] else v["reason"]
        fmt_ok = v["format"] == "gguf" or not expect.startswith("gguf") and expect != "valid"
        if got == expect and fmt_ok and (expect == "valid" or v["detail"]):
            passed += 1
        else:
            failed += 1
            print(f"FAIL {name} {' '.join(mode)}: expected {expect}, got {got} ({v['format']}: {v['detail']})")
# a header above --max-header
p = subprocess.run([binary, "validate", "--json", "--max-header", "100",
                    os.path.join(corpus, "valid_v3_f32.gguf")], capture_output=True, text=True)
got = json.loads(p.stdout)["reason"]
if got == "gguf_header_too_large":
    passed += 1
else:
    failed += 1
    print(f"FAIL --max-header 100: expected gguf_header_too_large, got {got}")
# standard input: the size is unknown to the gate, the verdict must not change
for name, expect in rows:
    with open(os.path.join(corpus, name + ".gguf"), "rb") as f:
        p = subprocess.run([binary, "validate", "--json", "-"], stdin=f, capture_output=True, text=True)
    v = json.loads(p.stdout.splitlines()[0])
    got = "valid" if v["valid"] else v["reason"]
    if got == expect:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name} (stdin): expected {expect}, got {got} ({v['detail']})")
print(f"gguf corpus: {len(rows)} files ({sum(e == 'valid' for _, e in rows)} valid, "
      f"{len({e for _, e in rows if e != 'valid'})} reasons)")
print(f"gguf: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PYEOF

# --- over HTTP: a real server; a valid GGUF upload is stored (kind gguf), a refused one
# is answered 422 with its reason, and POST /v1/scan says the same
W=$tmp/srv
mkdir -p "$W"
"$bin" serve --listen 127.0.0.1:0 --data "$W/data" >"$W/out" 2>"$W/log" &
spid=$!
trap 'kill $spid 2>/dev/null; wait $spid 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
port=
for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$W/log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "FAIL: server did not start"; cat "$W/log"; exit 1; }
U="http://127.0.0.1:$port"
T=$("$bin" token create --data "$W/data" --scope write --namespace acme | tail -n 1)
curl -s -o /dev/null -H "Authorization: Bearer $T" -d '{"name":"acme/llm"}' "$U/v1/models"
curl -s -o /dev/null -H "Authorization: Bearer $T" -X POST "$U/v1/models/acme/llm/versions"
hp=0
hf=0
check() { # NAME EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then hp=$((hp + 1)); else hf=$((hf + 1)); echo "FAIL http $1: expected $2, got $3"; fi
}
put() { # FILE NAME: prints status and body
    curl -s -o "$W/body" -w '%{http_code}' -H "Authorization: Bearer $T" -T "$tmp/corpus/$1" \
        "$U/v1/models/acme/llm/versions/1/files/$2"
}
check "valid upload" 201 "$(put valid_metadata.gguf model-Q8_0.gguf)"
check "valid kind" gguf "$(curl -s "$U/v1/models/acme/llm/versions/1/files" -H "Authorization: Bearer $T" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); f=d.get("files",d); print([x for x in f if x["path"]=="model-Q8_0.gguf"][0]["kind"])' 2>/dev/null)"
check "refused upload" 422 "$(put poc_string_length_huge.gguf evil.gguf)"
check "refused reason" gguf_string "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["reason"])' "$W/body" 2>/dev/null)"
check "refused padding upload" 422 "$(put padding_between_nonzero.gguf pad.gguf)"
# a valid GGUF named *.safetensors is not safetensors: refused as a format, 415
check "gguf named safetensors" 415 "$(put valid_v3_f32.gguf model.safetensors)"
check "scan as safetensors" refused_format "$(curl -s -H "Authorization: Bearer $T" --data-binary "@$tmp/corpus/valid_v3_f32.gguf" "$U/v1/scan" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["reason"])' 2>/dev/null)"
check "scan valid" true "$(curl -s -H "Authorization: Bearer $T" --data-binary "@$tmp/corpus/valid_all_types.gguf" "$U/v1/scan?kind=sidecar" |
    python3 -c 'import json,sys; print(str(json.load(sys.stdin)["valid"]).lower())' 2>/dev/null)"
check "scan refused" gguf_dims "$(curl -s -H "Authorization: Bearer $T" --data-binary "@$tmp/corpus/dims_5.gguf" "$U/v1/scan?kind=sidecar" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["reason"])' 2>/dev/null)"
echo "gguf http: $hp passed, $hf failed"
[ "$hf" -eq 0 ] || exit 1

# --- the differential run against @huggingface/gguf (needs node and npm)
if [ "${TG_GGUF_DIFFERENTIAL:-1}" = 1 ] && [ -x "$here/differential.sh" ]; then
    "$here/differential.sh" "$bin" "$tmp/corpus" || exit 1
fi

# --- serving (header, tensors, slices, conversions, the Hub's gguf field) over HTTP:
# tests/gguf/serve.py with Debian's python3 (NumPy, torch), checked against
# @huggingface/gguf (installed above by differential.sh) and @huggingface/hub
if [ "${TG_GGUF_DIFFERENTIAL:-1}" = 1 ] && [ -d "$here/node_modules/@huggingface/gguf" ]; then
    /usr/bin/python3 "$here/serve.py" "$bin" || exit 1
fi
