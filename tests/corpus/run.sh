#!/bin/sh
# Runs the gate's corpus: every row of tests/corpus/expected.tsv through
# `BINARY validate --json` and compares valid / reason / format / offset.
#   tests/corpus/run.sh build/tensorgate
#   CORPUS_FILTER=reason_json tests/corpus/run.sh build-asan/tensorgate   (only rows whose case contains the string)
# Modes: st = `validate --json`, sidecar = `validate --sidecar --json`,
# nonfinite = `validate --refuse-nonfinite --json`. Files of one mode go to the
# binary in a few large batches, the modes in parallel, so the whole corpus takes
# seconds even under ASan. The large cases (tens of MB) are written into a
# temporary directory by generate.py --large and removed afterwards.
# Prints one line per mismatch and "corpus: N passed, N failed"; exit 1 on any failure.
set -u
if [ $# -ne 1 ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
bin=$1
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=python3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tg-corpus.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

if ! "$py" "$here/generate.py" --large "$tmp/large"; then
    echo "corpus: generate.py --large failed" >&2
    echo "corpus: 0 passed, 1 failed"
    exit 1
fi

"$py" - "$bin" "$here" "$tmp/large" <<'EOF'
import json
import os
import subprocess
import sys
import threading

binary, here, large_dir = sys.argv[1], sys.argv[2], sys.argv[3]
filt = os.environ.get("CORPUS_FILTER", "")
dirs = [os.path.join(here, "cases"), os.path.join(here, "hand"), large_dir]
MODE_ARGS = {"st": [], "sidecar": ["--sidecar"], "nonfinite": ["--refuse-nonfinite"]}

failures = []
passed = 0


def fail(msg):
    failures.append(msg)


rows = []
with open(os.path.join(here, "expected.tsv"), encoding="utf-8") as f:
    for lineno, line in enumerate(f, 1):
        line = line.rstrip("\n")
        if not line or line.startswith("#"):
            continue
        cols = line.split("\t")
        if len(cols) != 7:
            fail(f"expected.tsv:{lineno}: {len(cols)} columns, want 7")
            continue
        case, mode, valid, reason, fmt, offset, note = cols
        if mode not in MODE_ARGS or valid not in ("0", "1"):
            fail(f"expected.tsv:{lineno}: bad mode or valid column")
            continue
        rows.append(dict(case=case, mode=mode, valid=valid == "1", reason=reason, format=fmt, offset=offset, note=note))

# Every row needs a file, every file a row.
present = {}
for d in dirs:
    if os.path.isdir(d):
        for fn in os.listdir(d):
            if fn.endswith(".expected"):
                continue
            if fn in present:
                fail(f"{fn}: present in two case directories")
            present[fn] = os.path.join(d, fn)
named = set()
for r in rows:
    if r["case"] in named:
        fail(f"{r['case']}: two rows")
    named.add(r["case"])
    if r["case"] not in present:
        fail(f"{r['case']}: row has no file")
for fn in sorted(present):
    if fn not in named:
        fail(f"{fn}: file has no row in expected.tsv")

rows = [r for r in rows if r["case"] in present and filt in r["case"]]
results = {}
errors = []


def run_mode(mode, paths):
    # Batches keep argv well under the system limit.
    for i in range(0, len(paths), 200):
        batch = paths[i:i + 200]
        try:
            proc = subprocess.run([binary, "validate", "--json"] + MODE_ARGS[mode] + batch,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            errors.append(f"{mode}: cannot run {binary}: {e}")
            return
        if proc.returncode not in (0, 1):
            tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            errors.append(f"{mode}: validate exited {proc.returncode}: {' | '.join(tail)}")
        for line in proc.stdout.decode("utf-8", "replace").split("\n"):
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except ValueError:
                errors.append(f"{mode}: not JSON: {line[:200]}")
                continue
            results[(mode, obj.get("file"))] = obj


threads = []
for mode in MODE_ARGS:
    paths = [present[r["case"]] for r in rows if r["mode"] == mode]
    if paths:
        t = threading.Thread(target=run_mode, args=(mode, paths))
        t.start()
        threads.append(t)
for t in threads:
    t.join()
for e in errors:
    fail(e)


def show(valid, reason, fmt, offset):
    return f"valid={int(valid)} reason={reason} format={fmt} offset={offset}"


# A mode whose validate calls gave no verdict at all is one problem, counted once per file.
silent_modes = {m for m in MODE_ARGS if not any(k[0] == m for k in results)}
for mode in sorted(silent_modes):
    n = sum(1 for r in rows if r["mode"] == mode)
    if n:
        fail(f"[{mode}]: no verdict line for any of {n} files")
        failures.extend([None] * (n - 1))
for r in rows:
    if r["mode"] in silent_modes:
        continue
    got = results.get((r["mode"], present[r["case"]]))
    if got is None:
        fail(f"{r['case']} [{r['mode']}]: no verdict line from validate")
        continue
    g_valid = bool(got.get("valid"))
    g_reason = got.get("reason") or "-"
    g_format = got.get("format") or "-"
    g_offset = "-" if got.get("offset") is None else str(got.get("offset"))
    ok = (g_valid == r["valid"] and g_reason == r["reason"] and (r["format"] == "-" or g_format == r["format"])
          and (r["offset"] == "-" or g_offset == r["offset"]))
    if ok:
        passed += 1
    else:
        detail = (got.get("detail") or "")[:160]
        fail(f"{r['case']} [{r['mode']}]: want {show(r['valid'], r['reason'], r['format'], r['offset'])}; "
             f"got {show(g_valid, g_reason, g_format, g_offset)} ({detail}) -- {r['note']}")

for msg in failures:
    if msg is not None:
        print("FAIL " + msg)
print(f"corpus: {passed} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
EOF
