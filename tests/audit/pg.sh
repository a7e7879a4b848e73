#!/bin/sh
# tests/audit/pg.sh BINARY: one audit chain across two replicas of one PostgreSQL
# catalog. Run under tests/scale/with-postgres.sh (it needs TENSORGATE_TEST_PG);
# tests/scale/pg-suite.sh runs it.
#  - replicas A and B on the database; 160 writes at once, 16 in flight, half through
#    each replica (model creations and refused ones), with curl;
#  - every write has its record: the log holds seq 1..N without a gap or a repeat,
#    N = the writes made, each record's X-Request-Id once;
#  - `tensorgate audit verify` holds through either replica (one chain, not two);
#  - psql: the trigger refuses an UPDATE; an UPDATE made with the trigger disabled is
#    named by verify (hash mismatch at that record).
# Ends with "audit-pg: N passed, N failed".
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
if [ -z "${TENSORGATE_TEST_PG:-}" ]; then
    echo "audit-pg: TENSORGATE_TEST_PG is unset; run it under tests/scale/with-postgres.sh" >&2
    echo "audit-pg: 0 passed, 1 failed"
    exit 1
fi
case $1 in
/*) BIN=$1 ;;
*) BIN=$(pwd)/$1 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/tg-audit-pg.XXXXXX")
chmod 755 "$W"
export TENSORGATE_CATALOG="$TENSORGATE_TEST_PG"
. "$HERE/../import/lib.sh"
PSQL="${TG_PG_BIN:-/usr/lib/postgresql/15/bin}/psql"
[ -x "$PSQL" ] || PSQL=psql

start_tg a
A="http://127.0.0.1:$port"
start_tg b
B="http://127.0.0.1:$port"
ADMIN=$("$BIN" token create --data "$W/a" --scope admin 2>/dev/null | tail -n 1)
T=$("$BIN" token create --data "$W/a" --scope write --namespace acme 2>/dev/null | tail -n 1)
before=$("$PSQL" "$TENSORGATE_TEST_PG" -tAc "SELECT count(*) FROM audit_log")

# 160 writes: i even through A, odd through B; every fourth one refused (no token)
N=160
seq 1 $N >"$W/ids"
xargs -P 16 -I{} sh -c '
    i={}
    if [ $((i % 2)) = 0 ]; then u=$1; else u=$2; fi
    if [ $((i % 4)) = 3 ]; then auth=""; else auth="Authorization: Bearer $3"; fi
    curl -s -o /dev/null -w "%{http_code}\n" -H "$auth" -H "X-Request-Id: pg-$i" \
        -H "Content-Type: application/json" -d "{\"name\":\"acme/m$i\"}" "$u/v1/models"
' sh "$A" "$B" "$T" <"$W/ids" >"$W/codes"
ok=$(grep -c '^201$' "$W/codes")
refused=$(grep -c '^401$' "$W/codes")
check "120 created, 40 refused (got $ok, $refused)" [ "$ok" = 120 ] && [ "$refused" = 40 ]

curl -s -H "Authorization: Bearer $ADMIN" "$B/v1/audit?format=jsonl" >"$W/export.jsonl"
python3 - "$W/export.jsonl" "$before" "$N" >"$W/py.out" 2>&1 <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
before, n = int(sys.argv[2]), int(sys.argv[3])
seqs = [r["seq"] for r in rows]
assert seqs == list(range(1, len(rows) + 1)), "seq has a gap or a repeat"
ids = [r["request_id"] for r in rows if r["request_id"].startswith("pg-")]
assert len(ids) == n and len(set(ids)) == n, ("request ids", len(ids), len(set(ids)))
assert len(rows) == before + n, ("rows", len(rows), before, n)
for a, b in zip(rows, rows[1:]):
    assert b["prev_hash"] == a["hash"], ("link", b["seq"])
print("ok", len(rows))
PYEOF
check "seq 1..N without a gap, every write once, linked ($(cat "$W/py.out"))" grep -q '^ok ' "$W/py.out"

"$BIN" audit verify --url "$A" --token "$ADMIN" >"$W/va.txt"
check "verify through A holds ($(cat "$W/va.txt"))" [ $? = 0 ]
"$BIN" audit verify --url "$B" --token "$ADMIN" >"$W/vb.txt"
check "verify through B holds" [ $? = 0 ]
check "A and B see one chain" [ "$(tail -n 1 "$W/va.txt")" = "$(tail -n 1 "$W/vb.txt")" ]

"$PSQL" "$TENSORGATE_TEST_PG" -tAc "UPDATE audit_log SET status = 200 WHERE seq = 7" \
    >/dev/null 2>"$W/upd.err"
check "the trigger refuses an UPDATE" grep -q "append-only" "$W/upd.err"
"$PSQL" "$TENSORGATE_TEST_PG" -tAc "TRUNCATE audit_log" >/dev/null 2>"$W/trunc.err"
check "and a TRUNCATE" grep -q "append-only" "$W/trunc.err"
"$PSQL" "$TENSORGATE_TEST_PG" -q -c "ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update" \
    -c "UPDATE audit_log SET user_agent = 'innocent' WHERE seq = 7" \
    -c "ALTER TABLE audit_log ENABLE TRIGGER audit_log_no_update" >/dev/null 2>&1
"$BIN" audit verify --url "$A" --token "$ADMIN" >"$W/v7.txt"
rc=$?
check "verify exits 1 and names record 7 ($(head -n 1 "$W/v7.txt"))" \
    sh -c "[ $rc = 1 ] && grep -q '^BREAK: record 7 edited: hash mismatch' '$W/v7.txt'"
"$BIN" audit verify --data "$W/b" >"$W/v8.txt"
check "offline through TENSORGATE_CATALOG too" grep -q '^BREAK: record 7 edited' "$W/v8.txt"

echo "audit-pg: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
