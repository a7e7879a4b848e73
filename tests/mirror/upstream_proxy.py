#!/usr/bin/env python3
"""tests/mirror/upstream_proxy.py PORT UPSTREAM_PORT LOG BIN_FILE: a plain HTTP proxy
in front of a tensorgate server used as a mirror's upstream. It forwards every GET
(Authorization and Range included) and appends one line per request to LOG (the
path), so the suite counts the downloads itself. It adds one file the upstream
cannot hold, because its gate refuses it: BIN_FILE as "pytorch_model.bin", listed
in every revision answer's "siblings" (with its size, blob id and LFS sha256) and
served for any .../resolve/.../pytorch_model.bin."""
import hashlib
import http.server
import json
import sys
import urllib.error
import urllib.request


class Proxy(http.server.BaseHTTPRequestHandler):
    upstream = 0
    log_path = ""
    extra = b""

    def log_message(self, *args):
        pass

    def send_bytes(self, status, body, headers):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        with open(self.log_path, "a") as log:
            log.write(self.path + "\n")
        if self.path.split("?")[0].endswith("/pytorch_model.bin") and "/resolve/" in self.path:
            body = self.extra
            rng = self.headers.get("Range")
            if rng and rng.startswith("bytes="):
                a, _, b = rng[6:].partition("-")
                a = int(a)
                b = int(b) if b else len(body) - 1
                b = min(b, len(body) - 1)
                part = body[a:b + 1]
                return self.send_bytes(206, part, [("Content-Range", "bytes %d-%d/%d" % (a, b, len(body))),
                                                   ("ETag", '"bin"')])
            return self.send_bytes(200, body, [("ETag", '"bin"')])
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.upstream, self.path))
        for name in ("Authorization", "Range"):
            if self.headers.get(name):
                req.add_header(name, self.headers.get(name))
        try:
            with urllib.request.urlopen(req) as r:
                status, body, headers = r.status, r.read(), r.getheaders()
        except urllib.error.HTTPError as e:
            status, body, headers = e.code, e.read(), e.headers.items()
        keep = [(k, v) for k, v in headers if k.lower() in ("content-type", "content-range", "etag",
                                                            "last-modified", "accept-ranges")]
        if status == 200 and self.path.startswith("/api/models/") and "/revision/" in self.path:
            info = json.loads(body)
            info["siblings"].append({
                "rfilename": "pytorch_model.bin", "size": len(self.extra),
                "blobId": hashlib.sha1(self.extra).hexdigest(),
                "lfs": {"sha256": hashlib.sha256(self.extra).hexdigest(), "size": len(self.extra)}})
            body = json.dumps(info).encode()
        self.send_bytes(status, body, keep)


def main():
    Proxy.upstream = int(sys.argv[2])
    Proxy.log_path = sys.argv[3]
    with open(sys.argv[4], "rb") as f:
        Proxy.extra = f.read()
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Proxy).serve_forever()


if __name__ == "__main__":
    main()
