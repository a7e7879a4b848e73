#!/usr/bin/python3
"""A webhook receiver for tests/webhooks: a plain http.server that checks each
request on its own, with Python's hmac, never with tensorgate's code.

    receiver.py PORT_FILE LOG SECRET [PORT]

Listens on 127.0.0.1 on PORT, or a free port, (written to PORT_FILE once
listening) and
appends one JSON line per request to LOG:
  {"path", "id", "type", "status", "signature_ok", "secret_ok", "body_ok",
   "content_type", "timestamp_ok", "body": the parsed body or null}
signature_ok: webhook-signature holds "v1,<base64 HMAC-SHA256(SECRET,
id + "." + timestamp + "." + body)>" (Standard Webhooks; several space-separated
signatures allowed); secret_ok: X-Webhook-Secret is SECRET (the Hub's way);
body_ok: the body is {id, type, timestamp, namespace, data} with id equal to
webhook-id; timestamp_ok: webhook-timestamp is within 5 minutes of now.

What it answers depends on the path (the query is ignored):
  /flaky  the first request of each webhook-id gets 500, the second 429 with
          Retry-After: 1, every later one 200;
  /ok     200;
  /fail   500, always.
A request whose signature or secret is wrong gets 401 (and is logged).
"""
import base64
import hashlib
import hmac
import http.server
import json
import sys
import threading
import time

PORT_FILE, LOG, SECRET = sys.argv[1], sys.argv[2], sys.argv[3].encode()
seen = {}
lock = threading.Lock()


def signature_ok(msg_id, timestamp, body, header):
    mac = hmac.new(SECRET, msg_id.encode() + b"." + timestamp.encode() + b"." + body,
                   hashlib.sha256).digest()
    expected = "v1," + base64.b64encode(mac).decode()
    return any(hmac.compare_digest(expected, part) for part in header.split(" ") if part)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        route = self.path.split("?")[0]
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        msg_id = self.headers.get("webhook-id", "")
        timestamp = self.headers.get("webhook-timestamp", "")
        sig = signature_ok(msg_id, timestamp, body, self.headers.get("webhook-signature", ""))
        secret = self.headers.get("X-Webhook-Secret", "") == SECRET.decode()
        try:
            stamp_ok = abs(int(timestamp) - time.time()) < 300
        except ValueError:
            stamp_ok = False
        try:
            parsed = json.loads(body)
            body_ok = (isinstance(parsed, dict)
                       and sorted(parsed) == ["data", "id", "namespace", "timestamp", "type"]
                       and parsed["id"] == msg_id and isinstance(parsed["data"], dict))
        except ValueError:
            parsed, body_ok = None, False
        with lock:
            count = seen.get((self.path, msg_id), 0) + 1
            seen[(self.path, msg_id)] = count
        headers = []
        if not (sig and secret):
            status = 401
        elif route == "/ok":
            status = 200
        elif route == "/fail":
            status = 500
        elif count == 1:
            status = 500
        elif count == 2:
            status = 429
            headers.append(("Retry-After", "1"))
        else:
            status = 200
        record = {"path": self.path, "id": msg_id,
                  "type": parsed.get("type") if isinstance(parsed, dict) else None,
                  "status": status, "signature_ok": sig, "secret_ok": secret,
                  "body_ok": body_ok, "timestamp_ok": stamp_ok,
                  "content_type": self.headers.get("Content-Type", ""), "body": parsed}
        with lock:
            with open(LOG, "a") as log:
                log.write(json.dumps(record) + "\n")
        answer = b'{"received": true}' if status == 200 else b'{"error": "try again"}'
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


port = int(sys.argv[4]) if len(sys.argv) > 4 else 0
server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402

os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
