#!/bin/sh
# The SARIF reports (docs/MANUAL.md, "Reports for a security team"), checked by a real
# validator: ajv against the SARIF 2.1.0 JSON schema of @microsoft/jest-sarif (both
# pinned in tests/sarif/package-lock.json, installed by `npm ci`; tests/sarif/validate.mjs).
# Starts `BINARY serve` on a free loopback port, makes a pickle importing several
# globals, Python source (x.py), a malformed GGUF, a malformed and a valid safetensors,
# and for each one compares (tests/sarif/check.py):
#   - POST /v1/scan?format=sarif (and with Accept: application/sarif+json) with the
#     JSON answer for the same body: ruleIds, levels, byte offsets, uri, length, SHA-256;
#   - `BINARY scan --format sarif` (the C client; the base name goes to the server, so
#     x.py is refused as code) with `BINARY scan --json`;
#   - `BINARY validate --format sarif` over all the files (one run, one artifact per
#     file) with `BINARY validate --json`;
# and that ?format=xml is 400 invalid_format. Every SARIF log goes through the validator.
#   tests/sarif/run.sh build/tensorgate
# Prints "sarif: N passed, N failed"; exit 1 on any failure.
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
case $1 in
/*) bin=$1 ;;
*) bin=$(pwd)/$1 ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -d "$here/node_modules/ajv" ] || [ ! -d "$here/node_modules/@microsoft/jest-sarif" ]; then
    if ! command -v npm >/dev/null 2>&1 ||
        ! (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >/dev/null 2>&1); then
        echo "tests/sarif: cannot install ajv and the SARIF schema (npm ci failed; is the npm registry reachable?)" >&2
        exit 1
    fi
fi
W=$(mktemp -d "${TMPDIR:-/tmp}/tg-sarif.XXXXXX")
spid=
cleanup() {
    [ -n "$spid" ] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT INT TERM
"$bin" serve --listen 127.0.0.1:0 --data "$W/data" >"$W/server.out" 2>"$W/server.log" &
spid=$!
port=
for _ in $(seq 1 100); do
    port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$W/server.log" | head -n 1)
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    echo "FAIL: the server did not start"
    cat "$W/server.log"
    echo "sarif: 0 passed, 1 failed"
    exit 1
fi
/usr/bin/python3 "$here/check.py" "$bin" "http://127.0.0.1:$port" "$W" "$here/validate.mjs"
