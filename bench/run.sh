#!/bin/sh
# bench/run.sh [BUILD_DIR]: the entry point of `make bench`. Runs every benchmark
# program built into BUILD_DIR/bench (the lib benches: header_parse, convert,
# slice_gather, ...; each prints its figures next to its anchors), then the
# server benchmarks (bench/server.sh, bench/convert_version.sh, bench/tensors.sh).
# Every figure is also written to BUILD_DIR/bench/results.json (an array of
# {name, value, unit, anchor, anchor_value, ratio}).
# BENCH_QUICK=1 asks every part for small sizes. Figures never decide pass or
# fail: the script fails only when a benchmark cannot run.
set -u
cd "$(dirname "$0")/.." || exit 2
build=${1:-${BUILD:-build}}
status=0
# every figure also goes to $build/bench/results.json (bench/results.sh, bench/bench_result.h)
mkdir -p "$build/bench"
BENCH_RESULTS=$(cd "$build/bench" && pwd)/results.jsonl
export BENCH_RESULTS
: >"$BENCH_RESULTS"

echo "tensorgate benchmarks: $(uname -m), $(nproc) cores, $(date -u +%Y-%m-%dT%H:%M:%SZ)${BENCH_QUICK:+ (BENCH_QUICK=$BENCH_QUICK)}"
for b in $(find "$build/bench" -maxdepth 1 -type f -perm -u+x 2>/dev/null | sort); do
    echo
    echo "== $(basename "$b")"
    if ! "$b"; then
        echo "bench/run.sh: $b failed" >&2
        status=1
    fi
done

# the server benchmarks, each a script taking the build dir: upload/download/
# header (server.sh), the upload ingest alone, paired with openssl (ingest.sh), derived-version conversion (convert_version.sh), tensor
# serving: GET, slices, dtype conversion (tensors.sh), wrk beside slowloris,
# oversized requests and refused uploads (hostile.sh), `tensorgate pull` vs curl (pull.sh),
# `tensorgate validate` vs a header-only python3 reader (validate.sh), RSS under load (memory.sh),
# a replica on radosgw and PostgreSQL vs direct (scale.sh),
# the Hub clients' uploads vs `tensorgate push` (hub_upload.sh; huggingface_hub only with HF_HUB_SRC)
# Python zero-copy preload attach vs the C client (python_preload.sh)
# the Python client's load_file (NumPy, torch) vs `tensorgate pull` (python_load.sh)
if [ -x "$build/tensorgate" ]; then
    for s in server ingest convert_version tensors bundle hostile pull validate memory scale \
        hub_upload python_preload python_load; do
        echo
        echo "== $s"
        if ! "bench/$s.sh" "$build"; then
            echo "bench/run.sh: bench/$s.sh failed" >&2
            status=1
        fi
    done
else
    echo "bench/run.sh: $build/tensorgate not built" >&2
    status=1
fi
# the JSON lines -> one array
{
    echo "["
    sed '$!s/$/,/' "$BENCH_RESULTS"
    echo "]"
} >"$build/bench/results.json"
echo
echo "figures as JSON: $build/bench/results.json ($(wc -l <"$BENCH_RESULTS") figures)"
exit $status
