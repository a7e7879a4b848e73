#!/bin/sh
# bench/validate.sh [BUILD_DIR]: `tensorgate validate FILE` (whole process: wall time
# and peak RSS from /usr/bin/time -f) beside a header-only reader measured in the
# same run on the same files. The anchor is what the safetensors library does to
# open a file for its metadata, written in the plainest Python: /usr/bin/python3
# reads the 8-byte length and json.loads the header (nothing of the data section).
#   1. a one-tensor file of 1 GiB (BENCH_QUICK=1: 64 MiB) of F32 data (random bytes);
#   2. a file of 100,000 tensors (F32 [4] each; an ~8 MB header), BENCH_QUICK=1 20,000.
# Each side runs VALIDATE_REPS times (default 3) in turn; the median of wall time and
# of max RSS is printed, and validate's verdict is checked to be "valid".
# Timing never fails anything: the script fails only when a step cannot run.
set -eu
cd "$(dirname "$0")/.."
. bench/results.sh
build=${1:-build}
bin=$(pwd)/$build/tensorgate
py=/usr/bin/python3
reps=${VALIDATE_REPS:-3}

if [ "${BENCH_QUICK:-0}" = 1 ]; then
    big_mb=64
    many=20000
else
    big_mb=1024
    many=100000
fi
[ -x "$bin" ] || { echo "bench/validate.sh: $bin is not built" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "bench/validate.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 2; }

work=$(mktemp -d /tmp/tg-bench-validate-XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM

"$py" - "$work" "$big_mb" "$many" <<'EOF'
import json, os, struct, sys
d, big_mb, many = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def write(path, header, data_len):
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        block = os.urandom(1 << 20)
        left = data_len
        while left:
            k = min(left, len(block))
            f.write(block[:k])
            left -= k
n = big_mb << 20
write(os.path.join(d, "big.safetensors"),
      {"weight": {"dtype": "F32", "shape": [n // 4], "data_offsets": [0, n]}}, n)
header = {"__metadata__": {"format": "pt"}}
for i in range(many):
    header["model.layers.%d.block.%d.weight" % (i // 100, i % 100)] = {
        "dtype": "F32", "shape": [4], "data_offsets": [16 * i, 16 * i + 16]}
write(os.path.join(d, "many.safetensors"), header, 16 * many)
EOF
cat >"$work/reference.py" <<'EOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
print(len(header) - ("__metadata__" in header))
EOF

# run_one OUT CMD...: appends "wall_s max_rss_kib" of one run to OUT
run_one() {
    out=$1
    shift
    t0=$(date +%s%N)
    /usr/bin/time -f "%M" -o "$work/time" "$@" >"$work/stdout"
    t1=$(date +%s%N)
    echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }') $(tail -n 1 "$work/time")" >>"$out"
}
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b <= 0) { print "n/a"; exit } printf "%.3g", a / b }'; }

for case in big many; do
    file=$work/$case.safetensors
    size=$(wc -c <"$file")
    : >"$work/ours" && : >"$work/ref"
    cat "$file" >/dev/null # the page cache holds it for both sides
    i=0
    while [ "$i" -lt "$reps" ]; do
        run_one "$work/ours" "$bin" validate "$file"
        grep -q ': valid (safetensors' "$work/stdout" || {
            echo "bench/validate.sh: validate did not accept $case.safetensors:" >&2
            cat "$work/stdout" >&2
            exit 2
        }
        run_one "$work/ref" "$py" "$work/reference.py" "$file"
        i=$((i + 1))
    done
    ours_s=$(awk '{ print $1 }' "$work/ours" | median)
    ours_kib=$(awk '{ print $2 }' "$work/ours" | median)
    ref_s=$(awk '{ print $1 }' "$work/ref" | median)
    ref_kib=$(awk '{ print $2 }' "$work/ref" | median)
    if [ "$case" = big ]; then
        label="validate, 1 tensor, $((size >> 20)) MiB file"
    else
        label="validate, $many tensors, $(awk -v b="$size" 'BEGIN { printf "%.1f", b / 1e6 }') MB file"
    fi
    anchor="python3 8-byte length + json.loads"
    printf '%-44s %8s s %8s KiB  anchor %s %8s s %8s KiB  ratio time %s, RSS %s\n' \
        "$label" "$ours_s" "$ours_kib" "$anchor" "$ref_s" "$ref_kib" \
        "$(ratio "$ours_s" "$ref_s")" "$(ratio "$ours_kib" "$ref_kib")"
    bench_result "$label: wall time" "$ours_s" s "$anchor" "$ref_s"
    bench_result "$label: max RSS" "$ours_kib" KiB "$anchor" "$ref_kib"
done
