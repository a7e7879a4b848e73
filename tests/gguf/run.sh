#!/bin/sh
# The GGUF corpus (docs/DESIGN.md, "GGUF"): generate.py writes valid files and named
# malformed classes; each goes through `BINARY validate --json` (whole file) and
# `validate --sidecar --json` (an upload's judgement of a file not named *.safetensors),
# and through standard input in one read ("-"), and its reason is compared with the
# expected one. With node and npm, tests/gguf/differential.sh then runs the corpus through
# @huggingface/gguf. An upload over HTTP of a valid and of a refused file is
# tests/gguf/upload.py against a real server.
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
