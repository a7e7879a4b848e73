#!/bin/sh
# tests/webhooks/run.sh BINARY: webhooks end to end, on SQLite, with a receiver
# written in Python (receiver.py: it checks the Standard Webhooks signature with
# Python's hmac, the X-Webhook-Secret header and the body's shape itself).
#  - tokens: no token 401, a write or read token 403, another namespace's admin 403;
#    the secret is shown once, never by a GET;
#  - the events of a model's life (model.created, version.published twice: a
#    publish and a conversion's derived version, alias.moved, upload.refused,
#    job.finished) reach a receiver that answers each id 500, then 429 with
#    Retry-After: 1, then 200: each event arrives under one id, three times, with
#    a valid signature and secret every time, and is accepted once;
#  - the delivery log (state, attempts, last status), a redelivery (the same id
#    again), a ping;
#  - a subscription whose deliveries keep failing is disabled after
#    --webhook-max-failures of them, and is enabled again by a PATCH;
#  - a server without --import-allow refuses a loopback or metadata target at
#    subscription time (422 webhook_address_forbidden), and a name that resolves
#    to loopback is refused at delivery (the delivery log says so, the receiver
#    sees nothing);
#  - kill -9 of the server right after a publish while the receiver is down:
#    after a restart (and the receiver's) the event is delivered.
# Ends with "webhooks: N passed, N failed".
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
PY=/usr/bin/python3
W=$(mktemp -d "${TMPDIR:-/tmp}/tg-webhooks.XXXXXX")
chmod 755 "$W"
. "$HERE/../import/lib.sh"
. "$HERE/lib.sh"

SECRET=the-receivers-secret-0123456789
start_receiver
FAST="--webhook-backoff-ms 200 --webhook-backoff-max-ms 800 --webhook-attempts 4 --webhook-max-failures 2 --webhook-poll-ms 100 --webhook-timeout 5"
# shellcheck disable=SC2086
start_server a --import-allow 127.0.0.1/32 $FAST
A="http://127.0.0.1:$port"
ADMIN=$("$BIN" token create --data "$W/a" --scope admin --namespace acme | tail -n 1)
OTHER=$("$BIN" token create --data "$W/a" --scope admin --namespace other | tail -n 1)
WRITE=$("$BIN" token create --data "$W/a" --scope write --namespace acme | tail -n 1)
READ=$("$BIN" token create --data "$W/a" --scope read --namespace acme | tail -n 1)
HOOKS="$A/v1/namespaces/acme/webhooks"

# --- tokens ---
body="{\"url\":\"$RECV/flaky\",\"events\":[\"model.created\"]}"
check "no token: 401" [ "$(req POST "$HOOKS" "" "$body")" = 401 ]
check "a write token: 403" [ "$(req POST "$HOOKS" "$WRITE" "$body")" = 403 ]
check "a read token: 403" [ "$(req POST "$HOOKS" "$READ" "$body")" = 403 ]
check "another namespace's admin: 403" [ "$(req POST "$HOOKS" "$OTHER" "$body")" = 403 ]
check "another namespace's admin cannot list: 403" [ "$(req GET "$HOOKS" "$OTHER")" = 403 ]
check "no token cannot list: 401" [ "$(req GET "$HOOKS" "")" = 401 ]

# --- a subscription to every change of a model's life ---
all='["model.created","version.published","alias.moved","upload.refused","job.finished"]'
check "subscribe: 201" [ "$(req POST "$HOOKS" "$ADMIN" "{\"url\":\"$RECV/flaky\",\"events\":$all,\"secret\":\"$SECRET\"}")" = 201 ]
H1=$(jget id)
check "the secret is shown once, at creation" [ "$(jget secret)" = "$SECRET" ]
req GET "$HOOKS/$H1" "$ADMIN" >/dev/null
check "a GET never shows the secret" not grep -q "$SECRET" "$W/body"
check "a GET shows the events" [ "$(jget events)" = "$(echo "$all" | tr -d ' ')" ]
check "an unknown event type: 400 webhook_events_invalid" \
    [ "$(req POST "$HOOKS" "$ADMIN" "{\"url\":\"$RECV/ok\",\"events\":[\"nope\"]}")" = 400 ] && jhas reason webhook_events_invalid
check "a short secret: 400 webhook_secret_invalid" \
    [ "$(req POST "$HOOKS" "$ADMIN" "{\"url\":\"$RECV/ok\",\"events\":[\"ping\"],\"secret\":\"x\"}")" = 400 ]
check "a file: URL: 400 or 422" [ "$(req POST "$HOOKS" "$ADMIN" '{"url":"file:///etc/passwd","events":["model.created"]}')" -ge 400 ]
check "another namespace's subscription is not found" [ "$(req GET "$A/v1/namespaces/other/webhooks/$H1" "$OTHER")" = 404 ]

# the model's life: created, a published version, an alias, a refused upload, a conversion
$PY "$HERE/lib.py" safetensors "$W/m.safetensors"
printf 'PK\003\004 not a safetensors file at all, a zip that claims to be' >"$W/bad.safetensors"
M="$A/v1/models/acme/m"
req POST "$A/v1/models" "$WRITE" '{"name":"acme/m"}' >/dev/null
req POST "$M/versions" "$WRITE" '{}' >/dev/null
curl -s -o /dev/null -H "Authorization: Bearer $WRITE" -T "$W/m.safetensors" "$M/versions/1/files/m.safetensors"
check "publish: 200" [ "$(req POST "$M/versions/1/publish" "$WRITE" '{}')" = 200 ]
check "alias: 200" [ "$(req PUT "$M/aliases/prod" "$WRITE" '{"version":1}')" = 200 ]
req POST "$M/versions" "$WRITE" '{}' >/dev/null
refused=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $WRITE" -T "$W/bad.safetensors" "$M/versions/2/files/bad.safetensors")
check "the bad upload is refused (got $refused)" [ "$refused" -ge 400 ]
check "convert: 202" [ "$(req POST "$M/versions/1/convert" "$WRITE" '{"dtype":"F16"}')" = 202 ]

wait_for "six events accepted" '[r for r in R if r["status"] == 200 and r["path"] == "/flaky"]' 6
check "six distinct event ids" [ "$(count 'ids(lambda r: r["path"] == "/flaky")')" = 6 ]
check "each id: 500, 429, 200 and nothing more" \
    [ "$(count 'ids(lambda r: r["path"] == "/flaky" and [x["status"] for x in R if x["id"] == r["id"]] == [500, 429, 200])')" = 6 ]
check "every request carries a valid signature, secret, timestamp and body" \
    [ "$(count '[r for r in R if not (r["signature_ok"] and r["secret_ok"] and r["body_ok"] and r["timestamp_ok"] and r["content_type"] == "application/json")]')" = 0 ]
for t in model.created alias.moved upload.refused job.finished; do
    check "one $t event" [ "$(count "ids(lambda r: r['type'] == '$t')")" = 1 ]
done
check "two version.published events (a publish, a derived version)" [ "$(count 'ids(lambda r: r["type"] == "version.published")')" = 2 ]
check "the events' namespace and data" [ "$(count '[r for r in R if r["body"]["namespace"] != "acme" or r["body"]["data"].get("model") != "acme/m"]')" = 0 ]
check "alias.moved names the alias and the version" \
    [ "$(count '[r for r in R if r["type"] == "alias.moved" and r["body"]["data"]["alias"] == "prod" and r["body"]["data"]["version"] == 1]')" -ge 1 ]

# --- the delivery log ---
req GET "$HOOKS/$H1/deliveries" "$ADMIN" >/dev/null
check "the log lists six deliveries, each delivered after 3 attempts with 200" \
    [ "$(jcount '[d for d in J["deliveries"] if d["state"] == "delivered" and d["attempts"] == 3 and d["last_status"] == 200 and d["last_error"] is None and d["next_attempt"] is None]')" = 6 ]
D1=$(jq1 'J["deliveries"][0]["id"]')
E1=$(jq1 'J["deliveries"][0]["event_id"]')
req GET "$HOOKS/$H1/deliveries/$D1" "$ADMIN" >/dev/null
check "one delivery" [ "$(jget event_id)" = "$E1" ]
check "an unknown delivery: 404 webhook_delivery_not_found" [ "$(req GET "$HOOKS/$H1/deliveries/999999" "$ADMIN")" = 404 ] && jhas reason webhook_delivery_not_found
check "an unknown webhook: 404 webhook_not_found" [ "$(req GET "$HOOKS/999999/deliveries" "$ADMIN")" = 404 ] && jhas reason webhook_not_found
check "deliveries: limit and cursor" [ "$(req GET "$HOOKS/$H1/deliveries?limit=4" "$ADMIN")" = 200 ] && [ "$(jcount 'J["deliveries"]')" = 4 ] && [ "$(jq1 'J["next_cursor"] is not None')" = True ]

# --- redelivery: the same id again ---
check "redeliver: 202" [ "$(req POST "$HOOKS/$H1/deliveries/$D1/redeliver" "$ADMIN")" = 202 ]
wait_for "the redelivery arrives" "[r for r in R if r['id'] == '$E1' and r['status'] == 200]" 2
check "it carries the same id" [ "$(count "[r for r in R if r['id'] == '$E1']")" = 4 ]

# --- ping ---
check "ping: 202" [ "$(req POST "$HOOKS/$H1/ping" "$ADMIN")" = 202 ]
P=$(jget event_id)
wait_for "the ping arrives" "[r for r in R if r['id'] == '$P' and r['status'] == 200 and r['type'] == 'ping']" 1

# --- persistent failure disables the subscription ---
check "subscribe to a failing target" [ "$(req POST "$HOOKS" "$ADMIN" "{\"url\":\"$RECV/fail\",\"events\":[\"alias.moved\"],\"secret\":\"$SECRET\"}")" = 201 ]
H2=$(jget id)
req PUT "$M/aliases/f1" "$WRITE" '{"version":1}' >/dev/null
req PUT "$M/aliases/f2" "$WRITE" '{"version":1}' >/dev/null
for _ in $(seq 1 300); do
    req GET "$HOOKS/$H2" "$ADMIN" >/dev/null
    [ "$(jget enabled)" = False ] && break
    sleep 0.1
done
check "disabled after 2 failed deliveries" [ "$(jget enabled)" = False ] && [ "$(jget consecutive_failures)" = 2 ]
check "the reason is given" jhas_text disabled_reason "2 deliveries in a row failed"
req GET "$HOOKS/$H2/deliveries" "$ADMIN" >/dev/null
check "each failed after 4 attempts" [ "$(jcount '[d for d in J["deliveries"] if d["state"] == "failed" and d["attempts"] == 4 and d["last_status"] == 500]')" = 2 ]
check "the receiver saw 4 tries of each" [ "$(count '[r for r in R if r["path"] == "/fail"]')" = 8 ]
req PUT "$M/aliases/f3" "$WRITE" '{"version":1}' >/dev/null
req GET "$HOOKS/$H2/deliveries" "$ADMIN" >/dev/null
check "a disabled subscription gets no new delivery" [ "$(jcount 'J["deliveries"]')" = 2 ]
check "PATCH enabled: 200" [ "$(req PATCH "$HOOKS/$H2" "$ADMIN" '{"enabled":true,"url":"'"$RECV"'/ok"}')" = 200 ] &&
    [ "$(jget enabled)" = True ] && [ "$(jget consecutive_failures)" = 0 ]
check "PATCH events" [ "$(req PATCH "$HOOKS/$H2" "$ADMIN" '{"events":["model.created"]}')" = 200 ] && [ "$(jget events)" = '["model.created"]' ]
check "PATCH by a write token: 403" [ "$(req PATCH "$HOOKS/$H2" "$WRITE" '{"enabled":false}')" = 403 ]
check "list: two subscriptions" [ "$(req GET "$HOOKS" "$ADMIN")" = 200 ] && [ "$(jcount 'J["webhooks"]')" = 2 ]
check "DELETE: 204" [ "$(req DELETE "$HOOKS/$H2" "$ADMIN")" = 204 ]
check "gone: 404" [ "$(req GET "$HOOKS/$H2" "$ADMIN")" = 404 ]

# --- the address policy, without --import-allow ---
# shellcheck disable=SC2086
start_server b $FAST
B="http://127.0.0.1:$port"
BADMIN=$("$BIN" token create --data "$W/b" --scope admin --namespace acme | tail -n 1)
BWRITE=$("$BIN" token create --data "$W/b" --scope write --namespace acme | tail -n 1)
BH="$B/v1/namespaces/acme/webhooks"
check "a loopback target is refused: 422" [ "$(req POST "$BH" "$BADMIN" "{\"url\":\"$RECV/ok\",\"events\":[\"model.created\"]}")" = 422 ] && jhas reason webhook_address_forbidden
check "the metadata address is refused: 422" [ "$(req POST "$BH" "$BADMIN" '{"url":"http://169.254.169.254/latest","events":["model.created"]}')" = 422 ]
check "a name is judged at delivery: 201" [ "$(req POST "$BH" "$BADMIN" "{\"url\":\"http://localhost:$RP/ok?from=b\",\"events\":[\"model.created\"],\"secret\":\"$SECRET\"}")" = 201 ]
HB=$(jget id)
req POST "$B/v1/models" "$BWRITE" '{"name":"acme/b"}' >/dev/null
for _ in $(seq 1 200); do
    req GET "$BH/$HB/deliveries" "$BADMIN" >/dev/null
    grep -q webhook_address_forbidden "$W/body" && break
    sleep 0.1
done
check "the delivery is refused at connect (the log says why)" grep -q webhook_address_forbidden "$W/body"
check "the receiver saw nothing from it" [ "$(count '[r for r in R if "from=b" in str(r)]')" = 0 ]

# --- kill -9 right after a publish, the receiver down ---
stop_receiver
req POST "$M/versions" "$WRITE" '{}' >/dev/null # version 4 (3 is the conversion's)
curl -s -o /dev/null -H "Authorization: Bearer $WRITE" -T "$W/m.safetensors" "$M/versions/4/files/m.safetensors"
code=$(req POST "$M/versions/4/publish" "$WRITE" '{}')
kill -9 "$(server_pid a)"
check "the publish answered 200 before the kill" [ "$code" = 200 ]
start_receiver "$RP"
# shellcheck disable=SC2086
start_server a --import-allow 127.0.0.1/32 $FAST
wait_for "after a restart the publish is delivered" '[r for r in R if r["type"] == "version.published" and r["body"]["data"]["version"] == 4 and r["status"] == 200]' 1
check "under one id" [ "$(count 'ids(lambda r: r["type"] == "version.published" and r["body"]["data"]["version"] == 4)')" = 1 ]

# --- signature.invalid: a publish refused for its signature (docs/SIGNING.md) ---
A="http://127.0.0.1:$port" # the restarted server
HOOKS="$A/v1/namespaces/acme/webhooks"
M="$A/v1/models/acme/m"
check "subscribe to signature.invalid" [ "$(req POST "$HOOKS" "$ADMIN" "{\"url\":\"$RECV/ok\",\"events\":[\"signature.invalid\"],\"secret\":\"$SECRET\"}")" = 201 ]
check "acme requires a signature" [ "$(req PUT "$A/v1/namespaces/acme/signing" "$ADMIN" '{"require_signature":true}')" = 200 ]
req POST "$M/versions" "$WRITE" '{}' >/dev/null # version 5
curl -s -o /dev/null -H "Authorization: Bearer $WRITE" -T "$W/m.safetensors" "$M/versions/5/files/m.safetensors"
check "an unsigned publish: 422" [ "$(req POST "$M/versions/5/publish" "$WRITE" '{}')" = 422 ] && jhas reason signature_required
wait_for "the refusal is announced" '[r for r in R if r["type"] == "signature.invalid" and r["status"] == 200]' 1
check "signature.invalid names the version and the reason" \
    [ "$(count '[r for r in R if r["type"] == "signature.invalid" and r["body"]["data"]["version"] == 5 and r["body"]["data"]["reason"] == "signature_required" and r["body"]["data"]["model"] == "acme/m"]')" = 1 ]

echo "webhooks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
