#!/bin/sh
# tests/mirror/run.sh BINARY: mirrors of a Hub repository (POST .../mirror and
# `tensorgate mirror`) against real servers on loopback, in a temp directory:
#  - server U (--auth-read) is the upstream: a model with two safetensors shards and
#    their index, a config and a README; a proxy in front of it (upstream_proxy.py)
#    logs every request path and adds a pickle pytorch_model.bin that U's own gate
#    would refuse to store;
#  - server A (--import-allow 127.0.0.1/32) mirrors it: no token 401, another
#    namespace's token 403, no upstream token: the job fails (the upstream's 401);
#    without allow_partial the job fails with mirror_refused listing the .bin and its
#    reason, and nothing is published; with --allow-partial (the CLI) a version is
#    published that records the upstream repo and commit, every file's bytes equal
#    (sha256, by hashlib) to the upstream's, the .bin left out and listed;
#  - the same commit again: already mirrored, no new version, nothing downloaded;
#  - config.json changed upstream and published: the mirror downloads config.json
#    (and the refused .bin) only, per the proxy's log; the rest is copied;
#  - the upstream token never shows in a job's JSON, the CLI's output, A's log or
#    A's job rows;
#  - server C (no --import-allow) refuses the loopback endpoint.
# Ends with "N passed, N failed".
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
case $1 in
/*) BIN=$1 ;;
*) BIN=$(pwd)/$1 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/tg-mirror.XXXXXX")
. "$HERE/../import/lib.sh"
cd "$W" || exit 2
python3 "$HERE/make_repo.py" "$W/repo" || exit 2
R="$W/repo"
FILES="model-00001-of-00002.safetensors model-00002-of-00002.safetensors model.safetensors.index.json config.json README.md"

# --- server U: the upstream, reads need a token
start_tg u --auth-read
TU=$("$BIN" token create --data "$W/u" --scope write --namespace src | tail -n 1)
PU=$port
U="http://127.0.0.1:$PU"
publish_upstream() { # a new version of src/m with FILES from R
    v=$(curl -s -H "Authorization: Bearer $TU" -X POST "$U/v1/models/src/m/versions" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
    for f in $FILES; do
        curl -s -o /dev/null -H "Authorization: Bearer $TU" -T "$R/$f" \
            "$U/v1/models/src/m/versions/$v/files/$f"
    done
    curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $TU" -X POST \
        "$U/v1/models/src/m/versions/$v/publish"
}
curl -s -o /dev/null -H "Authorization: Bearer $TU" -d '{"name":"src/m"}' "$U/v1/models"
check "upstream version 1 published" test "$(publish_upstream)" = 200

# --- the proxy in front of U
PP=$(free_port)
python3 "$HERE/upstream_proxy.py" "$PP" "$PU" "$W/proxy.log" "$R/evil.bin" &
pids="$pids $!"
wait_port "$PP" || exit 1
P="http://127.0.0.1:$PP"

# --- server A: the mirror
start_tg a --import-allow 127.0.0.1/32
T=$("$BIN" token create --data "$W/a" --scope write --namespace acme | tail -n 1)
TO=$("$BIN" token create --data "$W/a" --scope write --namespace other | tail -n 1)
A="http://127.0.0.1:$port"
curl -s -o /dev/null -H "Authorization: Bearer $T" -d '{"name":"acme/m"}' "$A/v1/models"

# mirror BODY [TOKEN]: POST, then poll the job; sets status, state, job (JSON)
mirror() {
    curl -s -o "$W/post.json" -w '%{http_code}' -H "Authorization: Bearer ${2:-$T}" \
        -H 'Content-Type: application/json' -d "$1" "$A/v1/models/acme/m/mirror" >"$W/status"
    status=$(cat "$W/status")
    state=none
    job=$(cat "$W/post.json")
    [ "$status" = 202 ] || return 0
    id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$W/post.json")
    for _ in $(seq 1 600); do
        job=$(curl -s -H "Authorization: Bearer $T" "$A/v1/jobs/$id")
        state=$(printf '%s' "$job" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')
        case $state in done | failed) return 0 ;; esac
        sleep 0.1
    done
}
jq_() { printf '%s' "$job" | python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"; }
BODY="{\"endpoint\":\"$P\",\"repo\":\"src/m\",\"revision\":\"main\",\"token\":\"$TU\""

curl -s -o /dev/null -w '%{http_code}' -d "$BODY}" "$A/v1/models/acme/m/mirror" >"$W/s"
check "no token: 401" test "$(cat "$W/s")" = 401
mirror "$BODY}" "$TO"
check "another namespace's token: 403" test "$status" = 403
mirror "{\"endpoint\":\"$P\",\"repo\":\"src/m\"}"
check "no upstream token: the job fails with the upstream's 401" \
    test "$state:$(jq_ 'j["error"]["reason"]')" = "failed:mirror_upstream_failed"
check "... and says so" sh -c "printf '%s' '$(jq_ 'j["error"]["detail"]')' | grep -q 'HTTP 401'"
mirror "{\"endpoint\":\"$P/\",\"repo\":\"src/m\",\"token\":3}"
check "a token that is not a string: 400 mirror_invalid" \
    test "$status:$(jq_ 'j["reason"]')" = "400:mirror_invalid"
mirror "{\"endpoint\":\"http://u:p@127.0.0.1:$PP\",\"repo\":\"src/m\"}"
check "credentials in the endpoint: 400" test "$status" = 400

# --- refused file, no allow_partial: nothing published
: >"$W/proxy.log"
mirror "$BODY}"
check "refused .bin: the job fails with mirror_refused" \
    test "$state:$(jq_ 'j["error"]["reason"]')" = "failed:mirror_refused"
check "... the result lists the .bin with the gate's reason" \
    test "$(jq_ '[(r["path"], r["reason"]) for r in j["result"]["refused"]]')" != "[]"
check "... named pytorch_model.bin" \
    test "$(jq_ '",".join(r["path"] for r in j["result"]["refused"])')" = pytorch_model.bin
check "... its reason is a gate reason" \
    sh -c "test -n '$(jq_ 'j["result"]["refused"][0]["reason"]')'"
check "... the detail names it" sh -c "printf '%s' '$(jq_ 'j["error"]["detail"]')' | grep -q pytorch_model.bin"
pub=$(curl -s "$A/v1/models/acme/m" | python3 -c \
    'import json,sys; print(sum(1 for v in json.load(sys.stdin)["versions"] if v["state"]=="published"))')
check "... nothing is published" test "$pub" = 0
check "... the upstream token is not in the job" sh -c "! printf '%s' '$job' | grep -qF '$TU'"

# --- allow_partial, through the CLI
TOK="$TU" "$BIN" mirror --url "$A" --token "$T" --allow-partial --upstream-token-env TOK \
    "$P" src/m@main acme/m >"$W/cli.out" 2>"$W/cli.err"
check "CLI mirror --allow-partial exits 0" test $? = 0
check "... prints the refused file" grep -q "refused  pytorch_model.bin" "$W/cli.out"
check "... and the version" grep -q "mirrored src/m@main (commit [0-9a-f]*) into version" "$W/cli.out"
check "... never the upstream token" sh -c "! grep -qF '$TU' '$W/cli.out' '$W/cli.err'"
V=$(sed -n 's/.* into version \([0-9]*\)$/\1/p' "$W/cli.out")
ver=$(curl -s "$A/v1/models/acme/m/versions/$V")
commit=$(curl -s -H "Authorization: Bearer $TU" "$U/api/models/src/m/revision/main" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["sha"])')
vq() { printf '%s' "$ver" | python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"; }
check "the version is published" test "$(vq 'j["state"]')" = published
check "... records the upstream repo and commit" \
    test "$(vq 'j["upstream"]["repo"] + "@" + j["upstream"]["commit"]')" = "src/m@$commit"
check "... and the endpoint, without credentials" test "$(vq 'j["upstream"]["endpoint"]')" = "$P"
check "... its description names both" sh -c "printf '%s' '$(vq 'j["upstream"]["description"]')' | grep -q 'src/m at commit $commit'"
check "... holds the five files, not the .bin" \
    test "$(vq '" ".join(sorted(f["path"] for f in j["files"]))')" = \
    "README.md config.json model-00001-of-00002.safetensors model-00002-of-00002.safetensors model.safetensors.index.json"
for f in $FILES; do
    got=$(curl -s "$A/acme/m/resolve/$V/$f" | python3 -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
    want=$(python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$R/$f")
    check "$f: the bytes are the upstream's" test "$got" = "$want"
done

# --- the same commit again: already mirrored
: >"$W/proxy.log"
mirror "$BODY}"
check "the same commit again: done, already mirrored as version $V" \
    test "$state:$(jq_ 'j["result"]["already_mirrored"]'):$(jq_ 'j["version"]')" = "done:True:$V"
check "... nothing downloaded" sh -c "! grep -q /resolve/ '$W/proxy.log'"
n=$(curl -s "$A/v1/models/acme/m" | python3 -c \
    'import json,sys; print(sum(1 for v in json.load(sys.stdin)["versions"] if v["state"]=="published"))')
check "... no new version" test "$n" = 1

# --- one file changes upstream: only it is downloaded
python3 -c 'import json,sys; json.dump({"model_type": "toy", "hidden_size": 128}, open(sys.argv[1], "w"))' "$R/config.json"
check "upstream version 2 published" test "$(publish_upstream)" = 200
: >"$W/proxy.log"
mirror "$BODY,\"allow_partial\":true}"
check "re-mirror after a change: done" test "$state" = done
V2=$(jq_ 'j["version"]')
check "... a new version" test "$V2" -gt "$V"
fetched=$(grep /resolve/ "$W/proxy.log" | sed 's|.*/||' | sort -u | tr '\n' ' ')
check "... downloads config.json (and the refused .bin) only: $fetched" \
    test "$fetched" = "config.json pytorch_model.bin "
check "... copies the 4 others" test "$(jq_ 'j["result"]["copied_files"]')" = 4
states=$(curl -s "$A/v1/models/acme/m" | python3 -c \
    'import json,sys; print(" ".join(v["state"] for v in json.load(sys.stdin)["versions"]))')
check "the failed and already-mirrored runs left no extra draft: $states" \
    test "$states" = "published published"
got=$(curl -s "$A/acme/m/resolve/$V2/config.json" | python3 -c 'import hashlib,sys; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())')
want=$(python3 -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],"rb").read()).hexdigest())' "$R/config.json")
check "... the new config.json's bytes" test "$got" = "$want"

# --- the upstream token is nowhere to be seen
check "the token is not in the job list" sh -c "! curl -s -H 'Authorization: Bearer $T' '$A/v1/jobs' | grep -qF '$TU'"
check "... nor in A's log" sh -c "! grep -qF '$TU' '$W/a.log'"
rows=$(python3 -c 'import sqlite3,sys; print("\n".join(r[0] or "" for r in sqlite3.connect(sys.argv[1]).execute("SELECT url FROM jobs")))' "$W/a/catalog.db")
check "... nor in A's ended job rows" sh -c "! printf '%s' '$rows' | grep -qF '$TU'"

# --- server C: no --import-allow, loopback refused
start_tg c
TC=$("$BIN" token create --data "$W/c" --scope write --namespace acme | tail -n 1)
C="http://127.0.0.1:$port"
curl -s -o /dev/null -H "Authorization: Bearer $TC" -d '{"name":"acme/m"}' "$C/v1/models"
s=$(curl -s -o "$W/c.json" -w '%{http_code}' -H "Authorization: Bearer $TC" -d "$BODY}" "$C/v1/models/acme/m/mirror")
check "a loopback upstream without --import-allow: 4xx import_address_forbidden" \
    test "$s:$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["reason"])' "$W/c.json")" = "422:import_address_forbidden"

echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
