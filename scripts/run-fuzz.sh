#!/bin/sh
# Runs every libFuzzer target in build-fuzz/ for SECONDS each, on its seed corpus
# (tests/fuzz/corpus/<target>/ when present; new inputs go to a scratch copy).
# Prints the executions each target ran. Exit status 1 if any target crashed.
set -u
cd "$(dirname "$0")/.."
seconds=${1:-60}
status=0
for target in build-fuzz/fuzz_*; do
    [ -x "$target" ] || continue
    name=$(basename "$target")
    work=$(mktemp -d)
    if [ -d "tests/fuzz/corpus/$name" ]; then
        cp -r "tests/fuzz/corpus/$name/." "$work/"
    fi
    log=$(mktemp)
    if "$target" -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$work/crash-" "$work" >"$log" 2>&1; then
        runs=$(grep -E 'stat::number_of_executed_units' "$log" | awk '{print $2}')
        echo "$name: ${runs:-?} executions in ${seconds}s, 0 crashes"
    else
        echo "$name: CRASH"
        tail -n 40 "$log"
        status=1
    fi
    rm -rf "$work" "$log"
done
exit $status
