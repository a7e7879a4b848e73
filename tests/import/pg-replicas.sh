#!/bin/sh
# tests/import/pg-replicas.sh BINARY: an import on two replicas of one PostgreSQL
# catalog is fetched once. Run under tests/scale/with-postgres.sh (it needs
# TENSORGATE_TEST_PG); tests/scale/pg-suite.sh runs it.
#  - replicas A and B (--job-lease-seconds 3, B's blobs a link to A's, as a shared
#    volume would be) and a hostile slow source (helpers.py slow: 16 bytes every
#    1.5 s, about 13 s for the whole file) that logs each GET and each whole body;
#  - an import queued through A: done once, in one attempt, the source asked once
#    and its body sent once in full (each replica renews the lease of the job it
#    runs, so the other never takes it over), the file in the draft once, with the
#    source's SHA-256, seen through both replicas; nothing left in either tmp/.
# Ends with "pg-replicas: N passed, N failed".
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
if [ -z "${TENSORGATE_TEST_PG:-}" ]; then
    echo "pg-replicas: TENSORGATE_TEST_PG is unset; run it under tests/scale/with-postgres.sh" >&2
    echo "pg-replicas: 0 passed, 1 failed"
    exit 1
fi
case $1 in
/*) BIN=$1 ;;
*) BIN=$(pwd)/$1 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/tg-import-pg.XXXXXX")
chmod 755 "$W"
export TENSORGATE_CATALOG="$TENSORGATE_TEST_PG"
. "$HERE/lib.sh"

SP=$(free_port)
python3 "$HERE/helpers.py" slow "$SP" "$W/slow.log" &
pids="$pids $!"
wait_port "$SP" || exit 1

start_tg a --job-lease-seconds 3 --import-allow 127.0.0.1/32 --import-min-rate 0
A="http://127.0.0.1:$port"
mkdir -p "$W/b"
ln -s "$W/a/blobs" "$W/b/blobs"
start_tg b --job-lease-seconds 3 --import-allow 127.0.0.1/32 --import-min-rate 0
B="http://127.0.0.1:$port"
T=$("$BIN" token create --data "$W/a" --scope write --namespace acme | tail -n 1)
curl -s -o /dev/null -H "Authorization: Bearer $T" -d '{"name":"acme/rep"}' "$A/v1/models"
curl -s -o /dev/null -H "Authorization: Bearer $T" -X POST "$A/v1/models/acme/rep/versions"
curl -s -o /dev/null -D "$W/post.headers" -H "Authorization: Bearer $T" \
    -d "{\"url\":\"http://127.0.0.1:$SP/slow/1500/64/rep.safetensors\"}" \
    "$A/v1/models/acme/rep/versions/1/files/rep.safetensors/import"
loc=$(sed -n 's/^Location: *\([^[:space:]]*\).*/\1/p' "$W/post.headers")
check "the import is queued (Location '$loc')" [ -n "$loc" ]
state=
for _ in $(seq 1 400); do
    curl -s -H "Authorization: Bearer $T" "$B$loc" >"$W/job.json"
    state=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("state"))' "$W/job.json")
    case $state in done | failed) break ;; esac
    sleep 0.1
done
attempts=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("attempts", 1))' "$W/job.json")
check "the import is done (got $state: $(cat "$W/job.json"))" [ "$state" = done ]
check "in one attempt (got $attempts)" [ "$attempts" = 1 ]
gets=$(grep -c '^GET rep.safetensors' "$W/slow.log")
dones=$(grep -c '^DONE rep.safetensors' "$W/slow.log")
check "the source was asked once (got $gets: $(tr '\n' ' ' <"$W/slow.log"))" [ "$gets" = 1 ]
check "one fetch completed (got $dones)" [ "$dones" = 1 ]
want=$(python3 -c 'import hashlib,sys; sys.path.insert(0, sys.argv[1]); import helpers
print(hashlib.sha256(helpers.safetensors(64)).hexdigest())' "$HERE")
for r in "$A" "$B"; do
    files=$(curl -s -H "Authorization: Bearer $T" "$r/v1/models/acme/rep/versions/1/files")
    count=$(echo "$files" | python3 -c 'import json,sys
d=json.load(sys.stdin); fs=d.get("files", d if isinstance(d, list) else [])
print(sum(1 for f in fs if f["path"] == "rep.safetensors"))')
    sha=$(echo "$files" | python3 -c 'import json,sys
d=json.load(sys.stdin); fs=d.get("files", d if isinstance(d, list) else [])
print("".join(f["sha256"] for f in fs if f["path"] == "rep.safetensors"))')
    check "$r: the file is in the draft once (got $count)" [ "$count" = 1 ]
    check "$r: with the source's SHA-256" [ "$sha" = "$want" ]
done
check "no replica took the job over" sh -c "! grep -q 'no longer this server' '$W/a.log' '$W/b.log'"
for n in a b; do
    left=$(find "$W/$n/tmp" -type f 2>/dev/null)
    check "replica $n: no temp file left ($left)" [ -z "$left" ]
done

echo "pg-replicas: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
