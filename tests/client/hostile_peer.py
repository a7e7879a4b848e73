"""A hostile tensorgate server for the client tests (standard library only): it
answers the routes `tensorgate pull` and the Python client call, and the model's
name picks how it misbehaves:

  acme/endless     model.safetensors listed at 4176 bytes; its body never ends (no length)
  acme/longer      the same file announced (Content-Length) at 4 GiB, then endless
  acme/trickle     the same file, its 4176 bytes announced, sent 4 bytes every 2 s
  acme/silent      the same file, whose GET is never answered
  acme/escape      a version whose files are named with terminal escapes, \\r\\n and C1,
                   and whose tensors are too
  acme/huge        every tensor and file answer claims Content-Length 4 GiB, sends 14 bytes
  acme/errflood    every answer a 500 whose problem body never ends
  acme/fine        a well-formed model: w F32 [4,3], h BF16 [2,2], in model.safetensors
                   (its bundle route answers the tensors asked for, as a bundle should)

The bundle route (GET or POST .../bundle) of other models misbehaves by name:
  acme/huge        claims Content-Length 4 GiB, sends 14 bytes
  acme/stranger    a well-formed bundle of a tensor that was not asked for
  acme/reshaped    the tensor asked for, with another shape
  acme/padded      the tensor asked for, and 8 bytes more than its header says
  acme/flaky       acme/fine's bundle, but every other answer is cut (the connection
                   closed) halfway through

Every request is counted, and every body byte sent, those of the file route apart
(GET /_stats: JSON). Run as a
program, it listens on a free loopback port and prints the port on stdout; the
Python tests import it and call start()."""

import hashlib
import http.server
import json
import struct
import sys
import threading
import time
import urllib.parse

LISTED = 4176


def safetensors(tensors):
    """safetensors bytes of [(name, dtype, shape, bytes)]."""
    header, off, data = {}, 0, b""
    for name, dtype, shape, b in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
        data += b
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


FINE = safetensors([("w", "F32", [4, 3], struct.pack("<12f", *range(12))),
                    ("h", "BF16", [2, 2], bytes(range(8)))])
FINE_HEADER_LEN = struct.unpack("<Q", FINE[:8])[0]



def _filler():
    """LISTED bytes of a well-formed safetensors file (w F32 [4], then a U8
    tensor of the rest), so a client reading a file by its header gets past the
    header before the misbehaviour shows."""
    n = LISTED
    while True:
        data = bytes(range(256)) * (n // 256 + 1)
        out = safetensors([("w", "F32", [4], struct.pack("<4f", 1, 2, 3, 4)), ("rest", "U8", [n], data[:n])])
        if len(out) == LISTED:
            return out
        n -= len(out) - LISTED


FILLER = _filler()
ESCAPES = ["\x1b]0;pwned\x07evil.safetensors", "line\r\nbreak.json", "c1-\u009b31m.bin", "del\x7f.bin"]


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []  # (method, path)
        self.body_bytes = 0
        self.file_bytes = 0  # of them, the bytes of the file route

    def add_request(self, method, path):
        with self.lock:
            self.requests.append((method, path))

    def add_bytes(self, n, file=False):
        with self.lock:
            self.body_bytes += n
            self.file_bytes += n if file else 0

    def snapshot(self):
        with self.lock:
            return {"requests": len(self.requests), "body_bytes": self.body_bytes, "file_bytes": self.file_bytes,
                    "paths": [m + " " + p for m, p in self.requests]}


def files_of(name):
    if name in ("fine", "flaky"):
        return [{"path": "model.safetensors", "sha256": hashlib.sha256(FINE).hexdigest(), "size": len(FINE),
                 "kind": "safetensors"}]
    if name == "escape":
        good = {"path": "config.json", "sha256": hashlib.sha256(b"{}").hexdigest(), "size": 2, "kind": "json"}
        return [good] + [{"path": p, "sha256": "0" * 64, "size": 10, "kind": "sidecar"} for p in ESCAPES]
    return [{"path": "model.safetensors", "sha256": hashlib.sha256(FILLER).hexdigest(), "size": LISTED,
             "kind": "safetensors"}]


def tensors_of(name):
    if name in ("fine", "flaky"):
        start = 8 + FINE_HEADER_LEN
        return [{"name": "w", "dtype": "F32", "shape": [4, 3], "file": "model.safetensors",
                 "data_offsets": [start, start + 48]},
                {"name": "h", "dtype": "BF16", "shape": [2, 2], "file": "model.safetensors",
                 "data_offsets": [start + 48, start + 56]}]
    if name == "escape":
        return [{"name": "\x1b[31mred\x07", "dtype": "F32", "shape": [4], "file": "config.json",
                 "data_offsets": [80, 96]}]
    return [{"name": "w", "dtype": "F32", "shape": [4], "file": "model.safetensors", "data_offsets": [80, 96]}]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    stats = None  # set by start()

    def log_message(self, *args):
        pass

    def send_json(self, obj, status=200):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_body(self, data, headers=(), file=False):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
            self.stats.add_bytes(len(data), file)

    def write_counted(self, data):
        self.wfile.write(data)
        self.wfile.flush()
        self.stats.add_bytes(len(data), "/files/" in self.path)

    def do_HEAD(self):
        self.do_GET()

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        self.stats.add_request(self.command, self.path)
        parts = [urllib.parse.unquote(p) for p in urllib.parse.urlsplit(self.path).path.split("/")]
        if len(parts) == 8 and parts[1:3] == ["v1", "models"] and parts[5] == "versions" and parts[7] == "bundle":
            try:
                wanted = json.loads(body).get("tensors")
            except ValueError:
                wanted = None
            return self.bundle(parts[4], wanted)
        return self.send_json({"status": 404, "reason": "not_found", "detail": "no such route"}, 404)

    def bundle(self, name, wanted):
        """A bundle of acme/fine's tensors (wanted: names, None for all), or a
        misbehaving one by the model's name."""
        if name == "huge":
            return self.claim_huge()
        have = {t["name"]: (t["dtype"], t["shape"], FINE[t["data_offsets"][0] : t["data_offsets"][1]])
                for t in tensors_of("fine")}
        if name == "fine":
            names = list(have) if wanted is None else wanted
            if any(n not in have for n in names):
                return self.send_json({"status": 404, "reason": "tensor_not_found", "detail": "no such tensor"}, 404)
            return self.send_body(safetensors([(n,) + have[n] for n in names]))
        if name == "flaky":
            whole = safetensors([(n,) + have[n] for n in (list(have) if wanted is None else wanted)])
            self.stats.flaky = getattr(self.stats, "flaky", 0) + 1
            if self.stats.flaky % 2:
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(whole)))
                self.end_headers()
                self.wfile.write(whole[: len(whole) // 2])
                self.wfile.flush()
                self.close_connection = True
                return None
            return self.send_body(whole)
        w = (wanted or ["w"])[0]
        if name == "stranger":
            return self.send_body(safetensors([("stranger", "F32", [4], bytes(16))]))
        if name == "reshaped":
            return self.send_body(safetensors([(w, "F32", [2, 2], bytes(16))]))
        if name == "padded":
            return self.send_body(safetensors([(w, "F32", [4], bytes(16))]) + bytes(8))
        return self.send_json({"status": 404, "reason": "not_found", "detail": "no such route"}, 404)

    def do_GET(self):
        self.stats.add_request(self.command, self.path)
        u = urllib.parse.urlsplit(self.path)
        if u.path == "/_stats":
            return self.send_json(self.stats.snapshot())
        parts = [urllib.parse.unquote(p) for p in u.path.split("/")]
        # "", v1, models, org, name, versions, rev, ...
        if len(parts) < 7 or parts[1:3] != ["v1", "models"] or parts[5] != "versions":
            return self.send_json({"status": 404, "reason": "not_found", "detail": "no such route"}, 404)
        name, rev, rest = parts[4], parts[6], parts[7:]
        if name == "errflood":
            return self.flood(500)
        if not rest:
            return self.send_json({"model": "acme/" + name, "version": 1, "state": "published",
                                   "digest": "1" * 64, "files": files_of(name)})
        if rest == ["tensors"]:
            return self.send_json({"version": 1, "tensors": tensors_of(name), "next_cursor": None})
        if rest[0] == "tensors" and len(rest) == 2:
            return self.tensor(name, rest[1], urllib.parse.parse_qs(u.query))
        if rest == ["files"]:
            return self.send_json({"version": 1, "files": files_of(name), "next_cursor": None})
        if rest[0] == "files" and rest[-1] == "header" and len(rest) > 2:
            return self.header(name)
        if rest[0] == "files":
            return self.file(name)
        if rest == ["bundle"]:
            return self.bundle(name, None)
        return self.send_json({"status": 404, "reason": "not_found", "detail": "no such route"}, 404)

    def header(self, name):
        if name == "huge":
            return self.claim_huge()
        self.send_json({"path": "model.safetensors", "size": len(FINE), "tensors": tensors_of(name),
                        "metadata": None})

    def claim_huge(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(4 << 30))
        self.send_header("X-Tensor-Dtype", "F32")
        self.send_header("X-Tensor-Shape", "[4]")
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.write_counted(b"fourteen bytes")
        self.close_connection = True

    def tensor(self, name, tensor, query):
        if name == "huge":
            return self.claim_huge()
        entry = next((t for t in tensors_of(name) if t["name"] == tensor), None)
        if entry is None:
            return self.send_json({"status": 404, "reason": "tensor_not_found", "detail": "no such tensor"}, 404)
        b, e = entry["data_offsets"]
        self.send_body(FINE[b:e], [("X-Tensor-Dtype", entry["dtype"]),
                                   ("X-Tensor-Shape", json.dumps(entry["shape"]).replace(" ", "")),
                                   ("X-Tensor-File", "model.safetensors")])

    def file(self, name):
        if name == "fine":
            return self.send_body(FINE, [("X-Content-SHA256", hashlib.sha256(FINE).hexdigest())], file=True)
        if name == "huge":
            return self.claim_huge()
        sha = hashlib.sha256(FILLER).hexdigest()
        if name == "silent":
            time.sleep(3600)
            return None
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("X-Content-SHA256", sha)
        if name == "trickle":
            self.send_header("Content-Length", str(LISTED))
            self.end_headers()
            for i in range(0, LISTED, 4):
                self.write_counted(FILLER[i : i + 4])
                time.sleep(2)
            return None
        if name == "longer":
            self.send_header("Content-Length", str(4 << 30))
        self.flood(200, started=True)

    def flood(self, status, started=False):
        """An endless body (after the headers, unless started), until the client hangs up."""
        if not started:
            self.send_response(status)
            self.send_header("Content-Type", "application/problem+json")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk = b'{"reason":"x","detail":"' if status >= 400 else b""
        chunk += FILLER * 16
        while True:
            self.write_counted(chunk)
            chunk = FILLER * 16


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a client hanging up on an endless body is the point


def start():
    """(server, stats): a peer on a free loopback port, serving in a thread."""
    stats = Stats()
    handler = type("BoundHandler", (Handler,), {"stats": stats})
    srv = Server(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, stats


if __name__ == "__main__":
    server, _ = start()
    print(server.server_address[1], flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        sys.exit(0)
