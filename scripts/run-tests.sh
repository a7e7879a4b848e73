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
    if [ -x tests/client/run.sh ]; then
        suite "$build client cli" tests/client/run.sh "$build/tensorgate"
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
if [ -x build/tensorgate ]; then
    suite "python client" tests/python/run.sh build/tensorgate
    suite "web page (chromium)" tests/web/run.sh build/tensorgate
fi

if [ -x tests/integration/run.sh ]; then
    suite "integration" tests/integration/run.sh build
    # The same programs against the ASan+UBSan server binary.
    if [ -x build-asan/tensorgate ]; then
        suite "integration (asan server)" tests/integration/run.sh build-asan
    fi
fi
# The S3 blob store against a real Ceph RADOS Gateway that the script starts and removes.
if [ -x build/tests/integration/s3 ]; then
    suite "s3 blob store (radosgw)" tests/scale/with-radosgw.sh sh -c \
        'build/tests/unit/server/storage/blobstore_s3 && build/tests/integration/s3 build'
fi
# The PostgreSQL catalog: a throwaway cluster, the catalog tests, two replicas, and
# integration programs with every server on it.
if [ -x tests/scale/pg-suite.sh ]; then
    suite "postgresql catalog" tests/scale/with-postgres.sh tests/scale/pg-suite.sh build
fi
# The distributed suite: three replicas on one PostgreSQL and one radosgw behind
# nginx (kill -9 mid-upload and mid-job, racing publishes, store and database outages).
if [ -x tests/scale/dist.sh ] && [ -x build/tensorgate ]; then
    suite "distributed (3 replicas, nginx, postgresql, radosgw)" tests/scale/dist.sh build
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
