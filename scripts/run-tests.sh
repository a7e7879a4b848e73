#!/bin/sh
# Runs every suite that `make test` built: unit, property, CLI, corpus and
# integration tests on the normal build, then all of them again under
# ASan+UBSan; each fuzz target briefly; the OpenAPI lint. Prints one line per
# suite and a closing "N passed, N failed" (suites).
set -u
cd "$(dirname "$0")/.."

passed=0
failed=0
failures=""
logdir=${TG_TEST_LOGS:-build/test-logs}
mkdir -p "$logdir"

suite() {
    name=$1
    shift
    log="$logdir/$(echo "$name" | tr '/ ' '__').log"
    start=$(date +%s)
    if "$@" >"$log" 2>&1; then
        passed=$((passed + 1))
        printf 'PASS  %-55s %3ss  %s\n' "$name" "$(($(date +%s) - start))" "$(grep -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 | sed 's/.*: //')"
    else
        failed=$((failed + 1))
        failures="$failures $name"
        printf 'FAIL  %-55s %3ss  (log: %s)\n' "$name" "$(($(date +%s) - start))" "$log"
        tail -n 30 "$log" | sed 's/^/      /'
    fi
}

for build in build build-asan; do
    [ -d "$build" ] || continue
    export TG_BUILD=$build
    for t in $(find "$build/tests/unit" "$build/tests/property" -type f -perm -u+x 2>/dev/null | sort); do
        suite "$t" "$t"
    done
    if [ -x tests/cli/run.sh ]; then
        suite "$build cli" tests/cli/run.sh "$build/tensorgate"
    fi
    if [ -x tests/corpus/run.sh ]; then
        suite "$build corpus" tests/corpus/run.sh "$build/tensorgate"
    fi
    if [ -x tests/readme/run.sh ]; then
        suite "$build readme" tests/readme/run.sh "$build/tensorgate"
    fi
    if [ -x tests/import/run.sh ]; then # imports from nginx, a second server, a cutting proxy
        suite "$build import" tests/import/run.sh "$build/tensorgate"
    fi
done
unset TG_BUILD

if [ -x tests/integration/run.sh ]; then
    suite "integration" tests/integration/run.sh build
    # The same programs against the ASan+UBSan server binary.
    if [ -x build-asan/tensorgate ]; then
        suite "integration (asan server)" tests/integration/run.sh build-asan
    fi
fi
if [ -x scripts/run-fuzz.sh ] && [ -d build-fuzz ]; then
    suite "fuzz smoke" scripts/run-fuzz.sh "${TG_FUZZ_SMOKE_SECONDS:-10}"
fi
suite "layer check (includes, SQL, blob paths, links)" scripts/layer-check.sh build
suite "format check (clang-format)" make --no-print-directory format-check
suite "lint (cppcheck, clang-tidy)" make --no-print-directory lint
if [ -x scripts/lint-openapi.sh ] && [ -f openapi.yaml ]; then
    suite "openapi lint" scripts/lint-openapi.sh
fi

echo
[ -n "$failures" ] && echo "failed suites:$failures"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
