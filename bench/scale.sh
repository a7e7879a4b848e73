#!/bin/sh
# bench/scale.sh BUILD_DIR: the scale-out figures (issue 11), each next to its
# anchor measured in the same run on the same object:
#   GET of a 1 GiB file through a replica on radosgw   vs  a direct SigV4 GET of the object (curl)
#   16 MiB range GETs through the replica               vs  the same ranges straight from radosgw
#   upload ingest through the replica (S3 multipart)    vs  a direct PUT of the same file (curl)
#   header GET req/s (wrk) on the PostgreSQL catalog    vs  the same on the SQLite catalog
# It starts its own PostgreSQL and radosgw (tests/scale/with-postgres.sh,
# with-radosgw.sh). radosgw runs on memstore here (the objects live in RAM, twice),
# so both sides read from memory: the ratio is the gateway's overhead.
# BENCH_QUICK=1: 64 MiB and short runs. TG_SCALE_ONLY=s3: only the radosgw figures
# (upload, GET, ranges), not the catalog's. TG_SCALE_MIB=N: an N MiB file.
# TG_SCALE_PROFILE=1, TG_SCALE_PERF=DIR: see the profile below. Timing never fails anything.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build}
if [ -z "${TENSORGATE_TEST_S3_ENDPOINT:-}" ] || [ -z "${TENSORGATE_TEST_PG:-}" ]; then
    # room for the upload's temporary object, its content copy and the direct PUT
    TG_RGW_MEMSTORE_BYTES=${TG_RGW_MEMSTORE_BYTES:-8589934592}
    export TG_RGW_MEMSTORE_BYTES
    exec tests/scale/with-postgres.sh tests/scale/with-radosgw.sh "$0" "$build"
fi
. bench/results.sh
bin=$(pwd)/$build/tensorgate
py=/usr/bin/python3
if [ "${BENCH_QUICK:-0}" = 1 ]; then
    mib=64
    reps=2
    up_reps=2
    wrk_seconds=1
    ranges=4
else
    mib=1024
    reps=3
    up_reps=1 # each upload leaves objects in radosgw's RAM until its garbage collection
    wrk_seconds=5
    ranges=32
fi
mib=${TG_SCALE_MIB:-$mib} # another size (the profile wants more than the quick 64 MiB)
range_bytes=$((16 * 1024 * 1024))
region=${AWS_REGION:-us-east-1}
sig="aws:amz:$region:s3"
auth="$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY"
endpoint=$TENSORGATE_TEST_S3_ENDPOINT
bucket=$TENSORGATE_TEST_S3_BUCKET

work=$(mktemp -d /tmp/tg-bench-scale-XXXXXX)
cleanup() {
    # the servers' pids are in $work/pids (start runs in a command substitution)
    [ -f "$work/pids" ] && kill $(cat "$work/pids") 2>/dev/null
    sleep 0.3
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

port() {
    "$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# start NAME ARGS...: a server on a free port; prints the port
start() {
    name=$1
    shift
    p=$(port)
    mkdir -p "$work/$name"
    "$bin" serve --listen "127.0.0.1:$p" --data "$work/$name" "$@" >"$work/$name.log" 2>&1 &
    echo $! >>"$work/pids"
    for _ in $(seq 1 200); do
        curl -sf -o /dev/null "http://127.0.0.1:$p/readyz" && break
        sleep 0.05
    done
    echo "$p"
}
best() { sort -g | head -n 1; }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
gbs() { echo "$1 $2" | awk '{ printf "%.3f", $1 / $2 / 1e9 }'; }

# a safetensors file of $mib MiB (one U8 tensor), made without holding it in memory
"$py" - "$work/big.safetensors" "$mib" <<'EOF'
import json, struct, sys
path, mib = sys.argv[1], int(sys.argv[2])
n = mib * 1024 * 1024 - 128
h = json.dumps({"w": {"dtype": "U8", "shape": [n], "data_offsets": [0, n]}}).encode()
h += b" " * (128 - 8 - len(h))
chunk = bytes(range(256)) * 4096
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    left = n
    while left:
        k = min(left, len(chunk))
        f.write(chunk[:k])
        left -= k
EOF
size=$(stat -c %s "$work/big.safetensors")
sha=$(sha256sum "$work/big.safetensors" | cut -d' ' -f1)

s3flags="--blob-store s3://$bucket/bench --s3-endpoint $endpoint --s3-region $region"
rp=$(start replica --catalog "$TENSORGATE_TEST_PG" $s3flags)
TENSORGATE_CATALOG=$TENSORGATE_TEST_PG "$bin" token create --data "$work/replica" --scope write \
    --namespace bench >"$work/token" 2>/dev/null
token=$(tail -n 1 "$work/token")
S=http://127.0.0.1:$rp
H="Authorization: Bearer $token"
curl -sf -o /dev/null -H "$H" -d '{"name":"bench/big"}' "$S/v1/models"
curl -sf -o /dev/null -H "$H" -X POST "$S/v1/models/bench/big/versions"

# --- upload: through the replica (gate + hash + multipart) vs a direct PUT
up=""
for i in $(seq 1 "$up_reps"); do
    [ "$i" -gt 1 ] && curl -s -o /dev/null -H "$H" -X DELETE "$S/v1/models/bench/big/versions/1/files/big.safetensors"
    t=$(curl -sS -o /dev/null -w '%{time_total}' -H "$H" -H 'Expect:' -T "$work/big.safetensors" \
        "$S/v1/models/bench/big/versions/1/files/big.safetensors")
    up="$up $t"
done
direct_up=""
for i in $(seq 1 "$up_reps"); do
    t=$(curl -sS -o /dev/null -w '%{time_total}' --aws-sigv4 "$sig" --user "$auth" \
        -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$work/big.safetensors" \
        "$endpoint/$bucket/direct/big-$i")
    direct_up="$direct_up $t"
done
curl -sf -o /dev/null -H "$H" -X POST "$S/v1/models/bench/big/versions/1/publish"
up_s=$(echo "$up" | tr ' ' '\n' | grep . | best)
dup_s=$(echo "$direct_up" | tr ' ' '\n' | grep . | best)
echo "upload ingest ${mib} MiB through a replica on radosgw: $(gbs "$size" "$up_s") GB/s   direct PUT to radosgw: $(gbs "$size" "$dup_s") GB/s"
bench_result "S3: upload ingest through a replica (${mib} MiB)" "$(gbs "$size" "$up_s")" GB/s \
    "direct PUT to radosgw" "$(gbs "$size" "$dup_s")"

# --- whole-file GET: replica vs direct signed GET of the same object
key="bench/sha256/$(echo "$sha" | cut -c1-2)/$sha"
get=""
dget=""
for _ in $(seq 1 "$reps"); do
    get="$get $(curl -sS -o /dev/null -w '%{time_total}' "$S/v1/models/bench/big/versions/1/files/big.safetensors")"
    dget="$dget $(curl -sS -o /dev/null -w '%{time_total}' --aws-sigv4 "$sig" --user "$auth" \
        -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$endpoint/$bucket/$key")"
done
get_s=$(echo "$get" | tr ' ' '\n' | grep . | best)
dget_s=$(echo "$dget" | tr ' ' '\n' | grep . | best)
echo "GET ${mib} MiB through a replica: $(gbs "$size" "$get_s") GB/s   direct signed GET: $(gbs "$size" "$dget_s") GB/s"
bench_result "S3: whole-file GET through a replica (${mib} MiB)" "$(gbs "$size" "$get_s")" GB/s \
    "direct signed GET from radosgw" "$(gbs "$size" "$dget_s")"

# --- 16 MiB range GETs at spread offsets, one connection each, summed
max_off=$((size - range_bytes))
rsum=0
dsum=0
for i in $(seq 0 $((ranges - 1))); do
    off=$(((max_off / ranges) * i))
    r="bytes=$off-$((off + range_bytes - 1))"
    t=$(curl -sS -o /dev/null -w '%{time_total}' -r "${r#bytes=}" "$S/v1/models/bench/big/versions/1/files/big.safetensors")
    d=$(curl -sS -o /dev/null -w '%{time_total}' -r "${r#bytes=}" --aws-sigv4 "$sig" --user "$auth" \
        -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$endpoint/$bucket/$key")
    rsum=$(echo "$rsum $t" | awk '{ print $1 + $2 }')
    dsum=$(echo "$dsum $d" | awk '{ print $1 + $2 }')
done
rbytes=$((ranges * range_bytes))
echo "16 MiB range GETs x$ranges through a replica: $(gbs "$rbytes" "$rsum") GB/s   direct: $(gbs "$rbytes" "$dsum") GB/s"
bench_result "S3: 16 MiB range GETs through a replica" "$(gbs "$rbytes" "$rsum")" GB/s \
    "the same ranges straight from radosgw" "$(gbs "$rbytes" "$dsum")"

# --- TG_SCALE_PROFILE=1: where the CPU goes. One more transfer of each kind, with
# the CPU seconds (utime+stime from /proc) of ceph (radosgw + OSD + monitor), the
# replica and curl, per GiB moved, and the busy share of the machine's cores
# (sum of CPU / wall / cores: near 1 means the path is bound by the CPUs).
# TG_SCALE_PERF=DIR: also perf record -g of the replica during its GET and upload.
if [ "${TG_SCALE_PROFILE:-0}" = 1 ]; then
    # shellcheck disable=SC2016 # the $( is text in rgw-stop
    rgwpidfile=$(sed -n 's/^p=$(cat "\(.*\)" 2>.*/\1/p' "$TG_RGW_STOP")
    cephpids="$(cat "$rgwpidfile") $(cat "$(dirname "$rgwpidfile")"/run/*.pid 2>/dev/null)"
    tgpid=$(head -n 1 "$work/pids")
    cores=$(nproc)
    ticks() { for p in "$@"; do awk '{ print $14 + $15 }' "/proc/$p/stat"; done | awk '{ t += $1 } END { print t }'; }
    clk=$(getconf CLK_TCK)
    # prof LABEL BYTES PERFNAME CMD...: runs CMD (a curl) under /usr/bin/time
    prof() {
        label=$1 bytes=$2 perfname=$3
        shift 3
        # shellcheck disable=SC2086 # several pids
        c0=$(ticks $cephpids)
        t0=$(ticks "$tgpid")
        if [ -n "${TG_SCALE_PERF:-}" ] && [ "$perfname" != - ]; then
            mkdir -p "$TG_SCALE_PERF"
            perf record -q -g -p "$tgpid" -o "$TG_SCALE_PERF/$perfname.data" 2>/dev/null &
            perfpid=$!
            sleep 0.5
        fi
        /usr/bin/time -f '%e %U %S' -o "$work/time" "$@" >/dev/null
        if [ -n "${TG_SCALE_PERF:-}" ] && [ "$perfname" != - ]; then
            kill -INT "$perfpid"
            wait "$perfpid" || true
        fi
        # shellcheck disable=SC2086
        c1=$(ticks $cephpids)
        t1=$(ticks "$tgpid")
        read -r wall cu cs <"$work/time"
        echo "$label $bytes $wall $cu $cs $c0 $c1 $t0 $t1 $clk $cores" | awk '{
            gib = $2 / 1073741824; ceph = ($7 - $6) / $10; tg = ($9 - $8) / $10; cu = $4 + $5
            printf "%-34s %6.2f s  ceph %5.2f  tensorgate %5.2f  curl %5.2f  total %5.2f CPU-s/GiB  busy %3.0f%%\n",
                $1, $3 / gib, ceph / gib, tg / gib, cu / gib, (ceph + tg + cu) / gib, 100 * (ceph + tg + cu) / $3 / $11 }'
    }
    curl -sf -o /dev/null -H "$H" -X POST "$S/v1/models/bench/big/versions"
    echo "profile (per GiB: wall seconds, then CPU seconds of each process; $cores cores):"
    prof direct-PUT "$size" - curl -sS -o /dev/null --aws-sigv4 "$sig" --user "$auth" \
        -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$work/big.safetensors" "$endpoint/$bucket/direct/prof"
    prof replica-upload "$size" upload curl -sS -o /dev/null -H "$H" -H 'Expect:' -T "$work/big.safetensors" \
        "$S/v1/models/bench/big/versions/2/files/big.safetensors"
    prof direct-GET "$size" - curl -sS -o /dev/null --aws-sigv4 "$sig" --user "$auth" \
        -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$endpoint/$bucket/$key"
    prof replica-GET "$size" get curl -sS -o /dev/null "$S/v1/models/bench/big/versions/1/files/big.safetensors"
    # the ranges: one curl for all of them (--next), its connections reused
    dr="" rr=""
    for i in $(seq 0 $((ranges - 1))); do
        off=$(((max_off / ranges) * i))
        [ -n "$dr" ] && dr="$dr --next" && rr="$rr --next"
        dr="$dr -sS -r $off-$((off + range_bytes - 1)) -o /dev/null --aws-sigv4 $sig --user $auth -H x-amz-content-sha256:UNSIGNED-PAYLOAD $endpoint/$bucket/$key"
        rr="$rr -sS -r $off-$((off + range_bytes - 1)) -o /dev/null $S/v1/models/bench/big/versions/1/files/big.safetensors"
    done
    # shellcheck disable=SC2086
    prof direct-16MiB-ranges "$rbytes" - curl $dr
    # shellcheck disable=SC2086
    prof replica-16MiB-ranges "$rbytes" ranges curl $rr
fi

[ "${TG_SCALE_ONLY:-}" = s3 ] && exit 0

# --- header GET req/s: PostgreSQL catalog (the replica) vs SQLite (a local server)
lp=$(start local)
"$bin" token create --data "$work/local" --scope write --namespace bench >"$work/ltoken" 2>/dev/null
ltoken=$(tail -n 1 "$work/ltoken")
L=http://127.0.0.1:$lp
LH="Authorization: Bearer $ltoken"
curl -sf -o /dev/null -H "$LH" -d '{"name":"bench/big"}' "$L/v1/models"
curl -sf -o /dev/null -H "$LH" -X POST "$L/v1/models/bench/big/versions"
curl -sf -o /dev/null -H "$LH" -T "$work/big.safetensors" "$L/v1/models/bench/big/versions/1/files/big.safetensors"
curl -sf -o /dev/null -H "$LH" -X POST "$L/v1/models/bench/big/versions/1/publish"
# @1: an immutable version (answered from the response cache after the first
# request); @latest: resolved through the catalog on every request
for rev in 1 latest; do
    path=/v1/models/bench/big/versions/$rev/files/big.safetensors/header
    for c in 16 64; do
        pg_rps=$(wrk -t2 -c"$c" -d"${wrk_seconds}s" "$S$path" | awk '/Requests\/sec/ { print $2 }')
        sq_rps=$(wrk -t2 -c"$c" -d"${wrk_seconds}s" "$L$path" | awk '/Requests\/sec/ { print $2 }')
        echo "header GET @$rev, $c connections: PostgreSQL catalog $pg_rps req/s   SQLite catalog $sq_rps req/s"
        bench_result "header GET @$rev req/s, PostgreSQL catalog, wrk -c$c" "$pg_rps" req/s \
            "SQLite catalog" "$sq_rps"
    done
done
