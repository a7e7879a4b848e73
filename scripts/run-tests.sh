#!/usr/bin/env bash
# Runs every suite that `make test` built: unit, property, CLI, corpus and
# integration tests on the normal build, then all of them again under
# ASan+UBSan; the scale-out suites (radosgw, PostgreSQL, three replicas); each
# fuzz target briefly; the layer check, format check, lint and OpenAPI lint.
#
# Suites are independent (every server picks an ephemeral port, every suite
# works in a temp directory of its own), so they run side by side: at most
# TG_TEST_JOBS at once (default 3: on 2 cores most suites wait on sockets,
# servers and sleeps, not on the CPU). The longest suites are queued first.
# Each suite's output goes to its own log (TG_TEST_LOGS, default
# build/test-logs); a line per suite is printed as it ends, a failed suite's
# log tail after it, then the failed suites, the wall time, and a closing
# "tests: N passed, N failed" (suites).
# TG_TEST_ONLY=REGEX runs only the suites whose name matches (grep -E).
# TG_TEST_FAST=1 (make check-fast) runs the inner loop: the unit and property
# programs of the normal build and the HTTP cases (tests/http/cases).
set -u
cd "$(dirname "$0")/.."

logdir=${TG_TEST_LOGS:-build/test-logs}
jobs=${TG_TEST_JOBS:-3}
only=${TG_TEST_ONLY:-}
mkdir -p "$logdir"
rm -f "$logdir"/*.rc

names=()
cmds=()
# suite NAME CMD [ARGS...]: queues CMD as the suite NAME (run from the repository root,
# with the environment given as leading VAR=VALUE words, as env(1) takes them).
suite() {
    local name=$1
    shift
    if [ -n "$only" ] && ! printf '%s\n' "$name" | grep -Eq -- "$only"; then
        return
    fi
    names+=("$name")
    cmds+=("$(printf '%q ' "$@")")
}

log_of() {
    printf '%s/%s.log' "$logdir" "$(printf '%s' "$1" | tr '/ ()' '____')"
}

# --- the queue, longest first -----------------------------------------------
if [ "${TG_TEST_FAST:-0}" = 1 ]; then
    suite "http cases" build/tests/integration/cases build
    for t in $(find build/tests/unit build/tests/property -type f -perm -u+x 2>/dev/null | sort); do
        suite "$t" env TG_BUILD=build "$t"
    done
    only='^$' # nothing else
fi
if [ -x tests/integration/run.sh ]; then
    suite "integration" tests/integration/run.sh build
    # The same programs against the ASan+UBSan server binary.
    if [ -x build-asan/tensorgate ]; then
        suite "integration (asan server)" tests/integration/run.sh build-asan
    fi
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
suite "lint (cppcheck, clang-tidy)" make --no-print-directory lint
# The S3 blob store against a real Ceph RADOS Gateway that the script starts and removes.
if [ -x build/tests/integration/s3 ]; then
    suite "s3 blob store (radosgw)" tests/scale/with-radosgw.sh sh -c \
        'build/tests/unit/server/storage/blobstore_s3 && build/tests/integration/s3 build'
fi
if [ -x build/tensorgate ]; then
    suite "python client" tests/python/run.sh build/tensorgate
    suite "web page (chromium)" tests/web/run.sh build/tensorgate
fi
for build in build build-asan; do
    [ -d "$build" ] || continue
    for s in import readme client cli corpus gguf sarif audit signing webhooks mirror; do
        [ -x "tests/$s/run.sh" ] || continue
        label=$s
        [ "$s" = client ] && label="client cli"
        [ "$s" = cli ] && label="cli"
        suite "$build $label" env TG_BUILD="$build" "tests/$s/run.sh" "$build/tensorgate"
    done
    for t in $(find "$build/tests/unit" "$build/tests/property" -type f -perm -u+x 2>/dev/null | sort); do
        suite "$t" env TG_BUILD="$build" "$t"
    done
done
if [ -x scripts/run-fuzz.sh ] && [ -d build-fuzz ]; then
    suite "fuzz smoke" scripts/run-fuzz.sh "${TG_FUZZ_SMOKE_SECONDS:-3}"
fi
suite "layer check (includes, SQL, blob paths, links)" scripts/layer-check.sh build
suite "format check (clang-format)" make --no-print-directory format-check
if [ -x scripts/lint-openapi.sh ] && [ -f openapi.yaml ]; then
    suite "openapi lint" scripts/lint-openapi.sh
fi

# --- running it ---------------------------------------------------------------
passed=0
failed=0
failures=""
began=$(date +%s)

run_one() { # index: runs suite i in the background of a subshell, records rc and seconds
    local i=$1 log start rc
    log=$(log_of "${names[$i]}")
    start=$(date +%s)
    eval "${cmds[$i]}" >"$log" 2>&1 </dev/null
    rc=$?
    echo "$rc $(($(date +%s) - start))" >"$log.rc"
}

report() { # index: prints the suite's line once it has ended
    local i=$1 log rc secs
    log=$(log_of "${names[$i]}")
    rc=1
    secs=?
    [ -f "$log.rc" ] && read -r rc secs <"$log.rc"
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
        printf 'PASS  %-55s %4ss  %s\n' "${names[$i]}" "$secs" \
            "$(grep -E '[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 | sed 's/.*: //')"
    else
        failed=$((failed + 1))
        failures="$failures
  ${names[$i]} (log: $log)"
        printf 'FAIL  %-55s %4ss  (exit %s, log: %s)\n' "${names[$i]}" "$secs" "$rc" "$log"
        tail -n 30 "$log" | sed 's/^/      /'
    fi
}

declare -A pid_of=()
next=0
total=${#names[@]}
while [ "$next" -lt "$total" ] || [ "${#pid_of[@]}" -gt 0 ]; do
    while [ "$next" -lt "$total" ] && [ "${#pid_of[@]}" -lt "$jobs" ]; do
        run_one "$next" &
        pid_of[$next]=$!
        next=$((next + 1))
    done
    wait -n 2>/dev/null || true
    for i in "${!pid_of[@]}"; do
        if ! kill -0 "${pid_of[$i]}" 2>/dev/null; then
            wait "${pid_of[$i]}" 2>/dev/null
            unset "pid_of[$i]"
            report "$i"
        fi
    done
done

echo
[ -n "$failures" ] && echo "failed suites:$failures"
elapsed=$(($(date +%s) - began))
printf 'run-tests: %d suites in %dm%02ds (%d at once)\n' "$total" $((elapsed / 60)) $((elapsed % 60)) "$jobs"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
