#!/bin/sh
# tests/python/run.sh BINARY: the Python client (clients/python, package
# tensorgate) against real servers: one plain, one with --rate-limit (to see
# 429 + Retry-After retried), --auth-read (to see tokens refused) and
# --header-timeout 1 (to see an idle keep-alive connection closed by the server),
# and nginx in front of the plain one for HTTPS, each on a free loopback port with a fresh data
# directory in a temp dir, stopped at the end. The checks are in
# tests/python/test_client.py, run by Debian's /usr/bin/python3 (NumPy, torch);
# then tests/python/test_preload.py (tensorgate.preload), which starts its own server.
# Ends with "N passed, N failed"; exits non-zero on a failure.
set -u
if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 BINARY" >&2
    exit 2
fi
case $1 in
/*) BIN=$1 ;;
*) BIN=$(pwd)/$1 ;;
esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${TG_PYTHON:-/usr/bin/python3}
W=$(mktemp -d "${TMPDIR:-/tmp}/tg-python.XXXXXX")
pids=
cleanup() {
    for p in $pids; do
        kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    rm -rf "$W"
}
trap cleanup EXIT INT TERM

# start NAME ARGS...: a server on a free port; sets $port
start() {
    name=$1
    shift
    "$BIN" serve --listen 127.0.0.1:0 --data "$W/$name" "$@" >"$W/$name.out" 2>"$W/$name.log" &
    pids="$pids $!"
    port=
    for _ in $(seq 1 100); do
        port=$(sed -n 's/.*listening on [^ ]*:\([0-9][0-9]*\).*/\1/p' "$W/$name.log" | head -n 1)
        [ -n "$port" ] && return 0
        sleep 0.1
    done
    echo "FAIL: the server $name did not start"
    cat "$W/$name.log"
    echo "0 passed, 1 failed"
    exit 1
}

start plain
port_plain=$port
start limited --rate-limit 5 --rate-burst 2 --auth-read --header-timeout 1
port_limited=$port
token_plain=$("$BIN" token create --data "$W/plain" --scope write --namespace acme | tail -n 1)
token_limited=$("$BIN" token create --data "$W/limited" --scope write --namespace acme | tail -n 1)
if [ -z "$token_plain" ] || [ -z "$token_limited" ]; then
    echo "FAIL: token create"
    echo "0 passed, 1 failed"
    exit 1
fi

# an HTTPS front: nginx terminating TLS (a self-signed certificate for
# 127.0.0.1) for the plain server, where nginx and openssl exist (else skipped)
https_url=-
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
if [ -x "$NGINX" ] && command -v openssl >/dev/null; then
    N=$W/nginx
    mkdir -p "$N"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$N/key.pem" -out "$N/cert.pem" -days 2 \
        -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 >"$N/openssl.log" 2>&1
    tls_port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    cat >"$N/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $N/nginx.pid;
error_log $N/error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $N/body;
    proxy_temp_path $N/proxy;
    fastcgi_temp_path $N/fastcgi;
    uwsgi_temp_path $N/uwsgi;
    scgi_temp_path $N/scgi;
    server {
        listen 127.0.0.1:$tls_port ssl;
        ssl_certificate $N/cert.pem;
        ssl_certificate_key $N/key.pem;
        location / {
            proxy_pass http://127.0.0.1:$port_plain;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
CONF
    "$NGINX" -e "$N/error.log" -p "$N" -c "$N/nginx.conf" >"$N/out" 2>&1 &
    pids="$pids $!"
    for _ in $(seq 1 50); do
        if "$PY" -c "import socket; socket.create_connection(('127.0.0.1', $tls_port), 1)" 2>/dev/null; then
            https_url=https://127.0.0.1:$tls_port
            break
        fi
        sleep 0.1
    done
    [ "$https_url" = - ] && { echo "note: nginx did not start; HTTPS checks skipped"; cat "$N/error.log"; }
fi

unset TENSORGATE_TOKEN SSL_CERT_FILE
PYTHONPATH="$ROOT/clients/python" PYTHONDONTWRITEBYTECODE=1 "$PY" "$ROOT/tests/python/test_client.py" \
    "http://127.0.0.1:$port_plain" "$token_plain" "http://127.0.0.1:$port_limited" "$token_limited" \
    "$https_url" "$W/nginx/cert.pem" >"$W/client.out" 2>&1
rc=$?
cat "$W/client.out"
# tensorgate.preload (zero-copy preloads) against a server of its own (fake CUDA backend)
PYTHONPATH="$ROOT/clients/python" PYTHONDONTWRITEBYTECODE=1 "$PY" "$ROOT/tests/python/test_preload.py" "$BIN" \
    >"$W/preload.out" 2>&1 || rc=1
cat "$W/preload.out"
# the suite's line: both counts added
cat "$W/client.out" "$W/preload.out" | grep -E '^[0-9]+ passed, [0-9]+ failed$' |
    awk '{ p += $1; f += $3 } END { printf "python client and preload: %d passed, %d failed\n", p, f }'
if [ "$rc" -ne 0 ]; then
    echo "--- server logs (last lines)"
    tail -n 20 "$W/plain.log" "$W/limited.log"
fi
exit "$rc"
