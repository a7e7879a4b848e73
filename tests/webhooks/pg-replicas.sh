#!/bin/sh
# tests/webhooks/pg-replicas.sh BINARY: two replicas on one PostgreSQL catalog
# share the webhook deliveries without sending one twice. Run under
# tests/scale/with-postgres.sh (it needs TENSORGATE_TEST_PG); tests/scale/pg-suite.sh
# runs it.
#  - replicas A and B, two delivery workers each, one subscription to
#    model.created at a receiver that accepts every request (receiver.py /ok);
#  - 20 models created, half through each replica: 20 events, each received
#    exactly once (20 requests, 20 distinct ids), each with a valid signature;
#    the delivery log says delivered after one attempt for every one;
#  - then a receiver that fails each id twice (/flaky: 500, then 429 with
#    Retry-After: 1): 6 more models, each id seen exactly three times.
# Ends with "webhooks-pg: N passed, N failed".
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
if [ -z "${TENSORGATE_TEST_PG:-}" ]; then
    echo "webhooks-pg: TENSORGATE_TEST_PG is unset; run it under tests/scale/with-postgres.sh" >&2
    echo "webhooks-pg: 0 passed, 1 failed"
    exit 1
fi
case $1 in
/*) BIN=$1 ;;
*) BIN=$(pwd)/$1 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
W=$(mktemp -d "${TMPDIR:-/tmp}/tg-webhooks-pg.XXXXXX")
chmod 755 "$W"
export TENSORGATE_CATALOG="$TENSORGATE_TEST_PG"
. "$HERE/../import/lib.sh"
. "$HERE/lib.sh"

# The suite's database is shared with the programs before this one: a subscription
# they left (the catalog unit tests make some, to unreachable addresses) would have
# these replicas' workers busy with its deliveries. Start from none.
PSQL="${TG_PG_BIN:-/usr/lib/postgresql/15/bin}/psql"
[ -x "$PSQL" ] || PSQL=psql
"$PSQL" "$TENSORGATE_TEST_PG" -qtAc "DELETE FROM webhook_deliveries; DELETE FROM webhook_events;
    DELETE FROM webhook_subscriptions" >/dev/null 2>&1 || true

SECRET=the-receivers-secret-0123456789
start_receiver
FAST="--import-allow 127.0.0.1/32 --webhook-workers 2 --webhook-backoff-ms 200 --webhook-backoff-max-ms 800 --webhook-poll-ms 50"
# shellcheck disable=SC2086
start_server a $FAST
A="http://127.0.0.1:$port"
mkdir -p "$W/b"
ln -s "$W/a/blobs" "$W/b/blobs"
# shellcheck disable=SC2086
start_server b $FAST
B="http://127.0.0.1:$port"
ADMIN=$("$BIN" token create --data "$W/a" --scope admin --namespace acme | tail -n 1)
WRITE=$("$BIN" token create --data "$W/a" --scope write --namespace acme | tail -n 1)

check "subscribe through A" [ "$(req POST "$A/v1/namespaces/acme/webhooks" "$ADMIN" "{\"url\":\"$RECV/ok\",\"events\":[\"model.created\"],\"secret\":\"$SECRET\"}")" = 201 ]
H=$(jget id)
for i in $(seq 1 20); do
    if [ $((i % 2)) = 0 ]; then S=$A; else S=$B; fi
    req POST "$S/v1/models" "$WRITE" "{\"name\":\"acme/m$i\"}" >/dev/null
done
wait_for "20 events received" '[r for r in R if r["path"] == "/ok"]' 20
sleep 1 # a second send of any of them, were there one, would have come by now
check "exactly 20 requests" [ "$(count '[r for r in R if r["path"] == "/ok"]')" = 20 ]
check "20 distinct ids" [ "$(count 'ids(lambda r: r["path"] == "/ok")')" = 20 ]
check "every one signed" [ "$(count '[r for r in R if not (r["signature_ok"] and r["secret_ok"] and r["body_ok"])]')" = 0 ]
req GET "$B/v1/namespaces/acme/webhooks/$H/deliveries?limit=100" "$ADMIN" >/dev/null
check "the log (through B): 20 delivered in one attempt" \
    [ "$(jcount '[d for d in J["deliveries"] if d["state"] == "delivered" and d["attempts"] == 1]')" = 20 ]
sa=$(grep -c 'webhook: delivery .*: delivered' "$W/a.log")
sb=$(grep -c 'webhook: delivery .*: delivered' "$W/b.log")
echo "webhooks-pg: replica A sent $sa, replica B sent $sb"
check "the replicas sent 20 together" [ $((sa + sb)) = 20 ]

check "PATCH to a flaky receiver" [ "$(req PATCH "$A/v1/namespaces/acme/webhooks/$H" "$ADMIN" "{\"url\":\"$RECV/flaky\"}")" = 200 ]
for i in $(seq 21 26); do
    if [ $((i % 2)) = 0 ]; then S=$A; else S=$B; fi
    req POST "$S/v1/models" "$WRITE" "{\"name\":\"acme/m$i\"}" >/dev/null
done
wait_for "6 events accepted" '[r for r in R if r["path"] == "/flaky" and r["status"] == 200]' 6
sleep 1
check "each id three times (500, 429, 200), never more" \
    [ "$(count 'ids(lambda r: r["path"] == "/flaky" and [x["status"] for x in R if x["id"] == r["id"]] == [500, 429, 200])')" = 6 ]
check "18 requests in all" [ "$(count '[r for r in R if r["path"] == "/flaky"]')" = 18 ]

echo "webhooks-pg: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
