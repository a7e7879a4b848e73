#!/bin/sh
# bench/run.sh [BUILD_DIR]: the entry point of `make bench`. Runs every benchmark
# program built into BUILD_DIR/bench (the lib benches: header_parse, convert,
# slice_gather, ...; each prints its figures next to its anchors), then the
# server benchmarks (bench/server.sh). BENCH_QUICK=1 asks every part for small
# sizes. Figures never decide pass or fail: the script fails only when a
# benchmark cannot run.
set -u
cd "$(dirname "$0")/.."
build=${1:-${BUILD:-build}}
status=0

echo "tensorgate benchmarks: $(uname -m), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ)${BENCH_QUICK:+ (BENCH_QUICK=$BENCH_QUICK)}"
for b in $(find "$build/bench" -maxdepth 1 -type f -perm -u+x 2>/dev/null | sort); do
    echo
    echo "== $(basename "$b")"
    if ! "$b"; then
        echo "bench/run.sh: $b failed" >&2
        status=1
    fi
done

echo
echo "== server"
if [ -x "$build/tensorgate" ]; then
    if ! bench/server.sh "$build"; then
        echo "bench/run.sh: server benchmarks failed" >&2
        status=1
    fi
else
    echo "bench/run.sh: $build/tensorgate not built" >&2
    status=1
fi
exit $status
