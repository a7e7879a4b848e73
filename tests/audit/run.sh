#!/bin/sh
# tests/audit/run.sh BINARY: the audit log end to end on SQLite, with the real
# sqlite3 CLI as the intruder and /usr/bin/python3's hashlib as an independent
# checker of the documented hash (docs/SECURITY.md, "The audit log").
#  - writes, refused writes (no token, another namespace's token, a read token) and
#    a refused read (--auth-read) through curl; `tensorgate audit list` with filters;
#  - every record's hash recomputed by Python from the JSON-lines export, with the
#    serialization as SECURITY.md states it, and each prev_hash the hash before;
#  - `tensorgate audit verify` holds, from the server (--url/--token) and offline
#    (--data);
#  - the catalog's triggers refuse UPDATE and DELETE of a record;
#  - one field of record 3 edited with sqlite3 (its trigger dropped first): verify
#    exits 1 and names record 3 (hash mismatch), from the server and offline;
#  - record 5 deleted: verify names the sequence gap at record 5;
#  - with the test build (tensorgate-test beside BINARY), an audit record that cannot
#    be written: the write still answers, the record is logged whole and counted on
#    /metrics, the chain goes on without a gap.
# Ends with "audit: N passed, N failed".
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
case $1 in
/*) BIN=$1 ;;
*) BIN=$(pwd)/$1 ;;
esac
PY=/usr/bin/python3
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/tg-audit.XXXXXX")
. "$HERE/../import/lib.sh"
unset TENSORGATE_CATALOG

start_tg d --auth-read
U="http://127.0.0.1:$port"
ADMIN=$("$BIN" token create --data "$W/d" --scope admin 2>/dev/null | tail -n 1)
WA=$("$BIN" token create --data "$W/d" --scope write --namespace acme 2>/dev/null | tail -n 1)
WO=$("$BIN" token create --data "$W/d" --scope write --namespace other 2>/dev/null | tail -n 1)
RD=$("$BIN" token create --data "$W/d" --scope read 2>/dev/null | tail -n 1)
WA_ID=$("$BIN" token list --data "$W/d" | awk -F'\t' '$2 == "write" && $3 == "acme" {print $1}')

code() { # METHOD PATH TOKEN [BODY]: the status
    if [ -n "$3" ]; then
        curl -s -o /dev/null -w '%{http_code}' -X "$1" -H "Authorization: Bearer $3" \
            -H 'Content-Type: application/json' ${4:+-d "$4"} "$U$2"
    else
        curl -s -o /dev/null -w '%{http_code}' -X "$1" -H 'Content-Type: application/json' \
            ${4:+-d "$4"} "$U$2"
    fi
}
check "create acme/m (201)" [ "$(code POST /v1/models "$WA" '{"name":"acme/m"}')" = 201 ]
check "new draft (201)" [ "$(code POST /v1/models/acme/m/versions "$WA" '{}')" = 201 ]
check "no token (401)" [ "$(code POST /v1/models "" '{"name":"acme/n"}')" = 401 ]
check "other namespace (403)" [ "$(code POST /v1/models/acme/m/versions "$WO" '{}')" = 403 ]
check "read token writes (403)" [ "$(code POST /v1/models/acme/m/versions "$RD" '{}')" = 403 ]
check "read without token (401)" [ "$(code GET /v1/models/acme/m "")" = 401 ]
check "read with a token (200)" [ "$(code GET /v1/models/acme/m "$RD")" = 200 ]
check "alias (200)" [ "$(code PUT /v1/models/acme/m/aliases/x "$WA" '{"version":1}')" != 000 ]
check "delete as write (403)" [ "$(code DELETE /v1/models/acme/m "$WA")" = 403 ]

# audit list: the filters, through the CLI
"$BIN" audit list --url "$U" --token "$ADMIN" >"$W/list.txt"
rows=$(wc -l <"$W/list.txt")
check "audit list prints every record (got $rows)" [ "$rows" -ge 8 ]
refused=$("$BIN" audit list --url "$U" --token "$ADMIN" --outcome refused | wc -l)
check "5 refusals (got $refused)" [ "$refused" = 5 ]
mine=$("$BIN" audit list --url "$U" --token "$ADMIN" --actor "$WA_ID" --json | wc -l)
check "the acme writer's records (got $mine)" [ "$mine" -ge 3 ]
anon=$("$BIN" audit list --url "$U" --token "$ADMIN" --actor anonymous | cut -f6,7 | sort | tr '\n' ' ')
check "anonymous records: the POST and the GET ($anon)" \
    [ "$anon" = "GET /v1/models/{org}/{name}	/v1/models/acme/m POST /v1/models	/v1/models " ]
ns=$("$BIN" audit list --url "$U" --token "$ADMIN" --namespace other | cut -f3,4)
check "the other namespace's refusal ($ns)" [ "$ns" = "403	forbidden" ]
"$BIN" audit list --url "$U" --token "$WA" >/dev/null 2>&1
check "audit list with a write token exits 1" [ $? = 1 ]

# the documented hash, recomputed by Python from the export
curl -s -H "Authorization: Bearer $ADMIN" "$U/v1/audit?format=jsonl" >"$W/export.jsonl"
"$PY" - "$W/export.jsonl" >"$W/py.out" 2>&1 <<'PYEOF'
import hashlib, json, sys
prev = "0" * 64
n = 0
for line in open(sys.argv[1], encoding="utf-8"):
    r = json.loads(line)
    n += 1
    assert r["seq"] == n, ("seq", r["seq"], n)
    assert r["prev_hash"] == prev, ("prev_hash", n)
    fields = [("seq", str(r["seq"])), ("time", r["time"]),
              ("token_id", "" if r["token_id"] is None else str(r["token_id"])),
              ("namespace", r["namespace"]), ("action", r["action"]),
              ("resource", r["resource"]), ("status", str(r["status"])),
              ("reason", r["reason"]), ("request_id", r["request_id"]),
              ("client", r["client"]), ("user_agent", r["user_agent"]),
              ("prev_hash", r["prev_hash"])]
    data = b"tensorgate-audit-v1\n"
    for name, value in fields:
        v = value.encode("utf-8")
        data += name.encode() + b"=" + str(len(v)).encode() + b":" + v + b"\n"
    assert hashlib.sha256(data).hexdigest() == r["hash"], ("hash", n)
    prev = r["hash"]
print("ok", n)
PYEOF
check "python recomputes every hash and link ($(cat "$W/py.out"))" grep -q '^ok ' "$W/py.out"

"$BIN" audit verify --url "$U" --token "$ADMIN" >"$W/v1.txt"
check "verify from the server holds ($(cat "$W/v1.txt"))" [ $? = 0 ]
"$BIN" audit verify --data "$W/d" >"$W/v2.txt"
check "verify offline holds ($(cat "$W/v2.txt"))" [ $? = 0 ]
"$BIN" audit verify --server "$U" --token "$ADMIN" --json >"$W/v2j.txt"
check "verify --server --json: status ok ($(cat "$W/v2j.txt"))" grep -q '"status":"ok"' "$W/v2j.txt"

# the triggers refuse an edit and a delete
sqlite3 "$W/d/catalog.db" "UPDATE audit_log SET status = 200 WHERE seq = 3" 2>"$W/upd.err"
check "UPDATE refused by the trigger" grep -q "append-only" "$W/upd.err"
sqlite3 "$W/d/catalog.db" "DELETE FROM audit_log WHERE seq = 3" 2>"$W/del.err"
check "DELETE refused by the trigger" grep -q "append-only" "$W/del.err"

# an intruder with the file: record 3 edited
sqlite3 "$W/d/catalog.db" "DROP TRIGGER audit_log_no_update;
    UPDATE audit_log SET resource = '/v1/models/acme/innocent' WHERE seq = 3"
"$BIN" audit verify --url "$U" --token "$ADMIN" >"$W/v3.txt"
rc=$?
check "verify exits 1 after an edit (got $rc)" [ "$rc" = 1 ]
check "and names record 3 ($(head -n 1 "$W/v3.txt"))" grep -q '^BREAK: record 3 edited: hash mismatch' "$W/v3.txt"
check "only record 3" [ "$(grep -c '^BREAK' "$W/v3.txt")" = 1 ]
"$BIN" audit verify --data "$W/d" >"$W/v4.txt"
check "offline too" grep -q '^BREAK: record 3 edited: hash mismatch' "$W/v4.txt"

# record 5 deleted
sqlite3 "$W/d/catalog.db" "DROP TRIGGER audit_log_no_delete; DELETE FROM audit_log WHERE seq = 5"
"$BIN" audit verify --url "$U" --token "$ADMIN" --json >"$W/v5.txt"
rc=$?
check "verify exits 1 after a delete (got $rc)" [ "$rc" = 1 ]
check "names the gap at record 5 ($(cat "$W/v5.txt" | tr '\n' ' '))" \
    grep -q '"break":"record 5 missing: sequence gap' "$W/v5.txt"
check "and still the edit of record 3" grep -q '"break":"record 3 edited' "$W/v5.txt"
"$BIN" audit verify --data "$W/d" >"$W/v6.txt"
check "offline: the gap at record 5" grep -q '^BREAK: record 5 missing: sequence gap' "$W/v6.txt"

# the catalog cannot take a record (the test build's SHA-256 fault hook fails the
# first audit hash): the write still answers 201, the record is logged whole and
# counted, and the next record follows without a gap
TB=$(dirname "$BIN")/tensorgate-test
if [ -x "$TB" ]; then
    mkdir -p "$W/f"
    TENSORGATE_TEST_SHA256_FAIL=audit:1 "$TB" serve --listen 127.0.0.1:0 --data "$W/f" \
        >"$W/f.out" 2>"$W/f.log" &
    pids="$pids $!"
    fport=
    for _ in $(seq 1 100); do
        fport=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$W/f.log" | head -n 1)
        [ -n "$fport" ] && break
        sleep 0.1
    done
    FU="http://127.0.0.1:$fport"
    FA=$("$TB" token create --data "$W/f" --scope admin 2>/dev/null | tail -n 1)
    FW=$("$TB" token create --data "$W/f" --scope write 2>/dev/null | tail -n 1)
    c1=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $FW" \
        -H 'X-Request-Id: lost-1' -d '{"name":"acme/f1"}' "$FU/v1/models")
    c2=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $FW" \
        -H 'X-Request-Id: kept-2' -d '{"name":"acme/f2"}' "$FU/v1/models")
    check "writes answer as ever when the record fails ($c1 $c2)" [ "$c1" = 201 ] && [ "$c2" = 201 ]
    check "the lost record is logged whole" \
        grep -q 'audit: record not written.*action="POST /v1/models".*status=201.*request_id=lost-1' "$W/f.log"
    m=$(curl -s "$FU/metrics" | grep -E '^tensorgate_audit_(records|failures)_total' | tr '\n' ' ')
    check "metrics count it ($m)" [ "$m" = "tensorgate_audit_records_total 1 tensorgate_audit_failures_total 1 " ]
    "$TB" audit verify --url "$FU" --token "$FA" >"$W/vf.txt"
    check "the chain holds: one record, seq 1 ($(cat "$W/vf.txt"))" grep -q '^1 records, seq 1\.\.1' "$W/vf.txt"
fi

# usage errors
"$BIN" audit verify --since 2020-01-01T00:00:00Z --url "$U" >/dev/null 2>&1
check "verify refuses filters (exit 2)" [ $? = 2 ]
"$BIN" audit frobnicate >/dev/null 2>&1
check "an unknown subcommand (exit 2)" [ $? = 2 ]

echo "audit: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
