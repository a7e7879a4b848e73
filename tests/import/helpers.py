"""Test helpers for tests/import/run.sh (Debian's python3, standard library only).

  helpers.py files DIR          writes the source files the suite imports
  helpers.py proxy PORT UPSTREAM_PORT LOG
                                an HTTP proxy to 127.0.0.1:UPSTREAM_PORT that forwards GETs
                                (Range included) and, once, cuts a response of more than
                                2 MiB after its first 1 MiB (a broken connection); it logs
                                each request's path (query included), Range and
                                Authorization to LOG (what an import sent the source)
  helpers.py liar PORT          a server that ignores Range, sends no Content-Length and
                                streams a valid safetensors head announcing 64 MiB of data
                                (more than --max-body), for as long as it is read
  helpers.py slow PORT LOG      a hostile slow source: GET /slow/MS/N/NAME answers 200 (no
                                ranges) with a Content-Length and a valid safetensors file
                                of N data bytes, sent 16 bytes every MS milliseconds; it
                                logs "GET NAME" when a request comes and "DONE NAME" when
                                the whole body was sent
"""
import http.client
import http.server
import json
import os
import socketserver
import struct
import sys
import time


def safetensors(nbytes, name="w"):
    count = nbytes // 4
    header = json.dumps({name: {"dtype": "F32", "shape": [count],
                                "data_offsets": [0, count * 4]}}).encode()
    header += b" " * ((8 - len(header) % 8) % 8)
    body = bytes((i * 7 + 3) % 251 for i in range(256)) * (count * 4 // 256)
    body += b"\0" * (count * 4 - len(body))
    # finite floats only: every 4th byte (the exponent's high byte) kept small
    body = bytearray(body)
    body[3::4] = b"\x3f" * (count)
    return struct.pack("<Q", len(header)) + header + bytes(body)


def files(directory):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "good.safetensors"), "wb") as f:
        f.write(safetensors(4 << 20))
    with open(os.path.join(directory, "big.safetensors"), "wb") as f:
        f.write(safetensors(10 << 20))
    # a pickle (protocol 2) of 4 MiB: what a .bin checkpoint starts with
    with open(os.path.join(directory, "pickle.safetensors"), "wb") as f:
        f.write(b"\x80\x02}q\x00(X\x06\x00\x00\x00weightq\x01" + b"\x00" * (4 << 20))
    # N = 100 and a header that is not JSON, then 4 MiB
    with open(os.path.join(directory, "badheader.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", 100) + b"x" * 100 + b"\x00" * (4 << 20))
    with open(os.path.join(directory, "config.json"), "wb") as f:
        f.write(b'{"model_type": "tiny"}\n')


class Proxy(http.server.BaseHTTPRequestHandler):
    upstream = 0
    log = ""
    cut = False

    def log_message(self, *args):
        pass

    def do_GET(self):
        with open(Proxy.log, "a") as f:
            f.write("%s %s %s\n" % (self.path, self.headers.get("Range", "-"),
                                     self.headers.get("Authorization", "-").replace(" ", "_")))
        conn = http.client.HTTPConnection("127.0.0.1", Proxy.upstream)
        headers = {}
        if self.headers.get("Range"):
            headers["Range"] = self.headers["Range"]
        conn.request("GET", self.path.split("?")[0], headers=headers)
        resp = conn.getresponse()
        self.send_response(resp.status)
        length = int(resp.getheader("Content-Length", "0"))
        for k, v in resp.getheaders():
            if k.lower() in ("content-length", "content-range", "etag", "last-modified",
                             "content-type", "accept-ranges", "location"):
                self.send_header(k, v)
        self.end_headers()
        sent = 0
        cut_now = not Proxy.cut and length > (2 << 20)
        while True:
            chunk = resp.read(65536)
            if not chunk:
                break
            self.wfile.write(chunk)
            sent += len(chunk)
            if cut_now and sent >= (1 << 20):
                Proxy.cut = True
                self.wfile.flush()
                self.connection.shutdown(2)
                self.close_connection = True
                return
        conn.close()


class Liar(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def do_GET(self):
        count = 16 << 20
        header = json.dumps({"w": {"dtype": "F32", "shape": [count],
                                   "data_offsets": [0, count * 4]}}).encode()
        header += b" " * ((8 - len(header) % 8) % 8)
        self.send_response(200)
        self.end_headers()
        try:
            self.wfile.write(struct.pack("<Q", len(header)) + header)
            block = b"\x00\x00\x80\x3f" * 16384
            for _ in range((count * 4) // len(block)):
                self.wfile.write(block)
        except (BrokenPipeError, ConnectionResetError):
            pass


class Slow(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    log = ""

    def log_message(self, *args):
        pass

    def note(self, text):
        with open(Slow.log, "a") as f:
            f.write(text + "\n")

    def do_GET(self):
        parts = self.path.split("/")
        if len(parts) != 5 or parts[1] != "slow":
            self.send_error(404)
            return
        interval, nbytes, name = int(parts[2]) / 1000.0, int(parts[3]), parts[4]
        self.note("GET " + name)
        body = safetensors(nbytes)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            self.wfile.flush()
            for i in range(0, len(body), 16):
                time.sleep(interval)
                self.wfile.write(body[i:i + 16])
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.note("CUT " + name)
            return
        self.note("DONE " + name)


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    if sys.argv[1] == "files":
        files(sys.argv[2])
    elif sys.argv[1] == "proxy":
        Proxy.upstream = int(sys.argv[3])
        Proxy.log = sys.argv[4]
        Server(("127.0.0.1", int(sys.argv[2])), Proxy).serve_forever()
    elif sys.argv[1] == "slow":
        Slow.log = sys.argv[3]
        Server(("127.0.0.1", int(sys.argv[2])), Slow).serve_forever()
    elif sys.argv[1] == "liar":
        Server(("127.0.0.1", int(sys.argv[2])), Liar).serve_forever()


if __name__ == "__main__":
    main()
