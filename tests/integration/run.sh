#!/bin/sh
# tests/integration/run.sh BUILD_DIR: runs every integration program built into
# BUILD_DIR/tests/integration (each starts its own server from BUILD_DIR/tensorgate)
# from the repository root, each bounded by a timeout, TG_INTEGRATION_JOBS (2) at once. Prints each program's
# result and a closing "integration: N passed, N failed" (checks, summed; a
# program that dies without its report counts as one failure). Exits non-zero
# when anything failed.
set -u
cd "$(dirname "$0")/../.."
build=${1:-build}
dir=$build/tests/integration

if [ ! -x "$build/tensorgate" ]; then
    echo "integration: $build/tensorgate is not built" >&2
    echo "integration: 0 passed, 1 failed"
    exit 1
fi

passed=0
failed=0
programs=0
# The programs are independent (each starts its own server on an ephemeral port):
# TG_INTEGRATION_JOBS of them run at once (default 2), each into its own output file.
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
find "$dir" -maxdepth 1 -type f -perm -u+x 2>/dev/null | sort >"$out/list"
# shellcheck disable=SC2016
xargs -P "${TG_INTEGRATION_JOBS:-2}" -I{} sh -c \
    'timeout -k 5 150 "$1" "$2" >"$3/$(basename "$1").out" 2>&1; echo $? >"$3/$(basename "$1").rc"' \
    sh {} "$build" "$out" <"$out/list"
for t in $(cat "$out/list"); do
    programs=$((programs + 1))
    o=$out/$(basename "$t").out
    rc=$(cat "$out/$(basename "$t").rc" 2>/dev/null || echo 1)
    line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$o" | tail -n 1)
    if [ -n "$line" ]; then
        p=$(echo "$line" | sed -E 's/.* ([0-9]+) passed, ([0-9]+) failed.*/\1/')
        f=$(echo "$line" | sed -E 's/.* ([0-9]+) passed, ([0-9]+) failed.*/\2/')
    else
        p=0
        f=0
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1 # died, timed out or could not start its server
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$rc" -eq 0 ] && [ "$f" -eq 0 ]; then
        echo "PASS $(basename "$t"): $p checks"
    else
        echo "FAIL $(basename "$t") (exit $rc): $p passed, $f failed"
        sed 's/^/    /' "$o"
    fi
done

if [ "$programs" -eq 0 ]; then
    echo "integration: no programs in $dir (make test-binaries builds them)" >&2
    failed=$((failed + 1))
fi
echo "integration: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
