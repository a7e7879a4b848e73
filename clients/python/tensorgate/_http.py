"""HTTP transport of the tensorgate client: one keep-alive connection per
client (http.client), bearer token, bounded retries on 429/503 (honouring
Retry-After) and on a dropped keep-alive connection (or its 408), and errors carrying the
server's problem `reason` code and `detail` sentence. Every body is bounded by what
the request can return (the caller's limit): a longer one, announced or sent, is
the client's own `response_too_large`, and memory grows only with the bytes that
arrive, never from a Content-Length; a body that moves under 1 KiB in
`stall_timeout` seconds is `stalled`. Client.stream hands a tensor body over
as a Body, read straight into the caller's arrays (one copy)."""

import http.client
import json
import ssl
import time
import urllib.parse

__all__ = ["TensorgateError", "Client"]

# At most this many retries of one request, and at most this long a sleep for
# one Retry-After (seconds), so a busy server cannot stall a caller for long.
MAX_RETRIES = 4
MAX_RETRY_AFTER = 10.0
# The largest JSON answer kept (a page of 10000 tensors, a header), the largest
# problem body read of a refusal, and the progress a body owes per stall window.
MAX_JSON = 512 << 20
MAX_PROBLEM = 64 << 10
STALL_BYTES = 1024


class TensorgateError(Exception):
    """A refusal by the server (or a transport failure).

    status: the HTTP status (0 for a transport failure);
    reason: the server's stable reason code ("tensor_not_found",
            "unauthorized", ...; "connection_failed" for a transport failure);
    detail: the server's one-sentence explanation;
    problem: the whole problem+json object (a dict, possibly empty).
    """

    def __init__(self, status, reason, detail, problem=None, url=None):
        self.status = status
        self.reason = reason
        self.detail = detail
        self.problem = problem or {}
        self.url = url
        super().__init__(f"{status} {reason}: {detail}" if status else f"{reason}: {detail}")


class Response:
    """A completed response: status, headers (case-insensitive lookup), body."""

    def __init__(self, status, headers, body):
        self.status = status
        self._headers = {k.lower(): v for k, v in headers}
        self.body = body

    def header(self, name, default=None):
        return self._headers.get(name.lower(), default)

    def json(self):
        return json.loads(self.body.decode("utf-8"))


def _retry_after(value):
    """Seconds to wait for a Retry-After value (delta-seconds only; an HTTP
    date or a missing header gives a short default)."""
    if value is None:
        return 0.5
    try:
        secs = float(value.strip())
    except ValueError:
        return 1.0
    if secs < 0:
        secs = 0.0
    return min(secs, MAX_RETRY_AFTER)


class Client:
    """A connection to one tensorgate server (scheme://host:port)."""

    def __init__(self, base_url, token=None, timeout=60.0, sleep=time.sleep, stall_timeout=30.0):
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https"):
            raise ValueError(f"tensorgate: only http:// and https:// URLs are supported, not {base_url!r}")
        if not u.hostname:
            raise ValueError(f"tensorgate: no host in {base_url!r}")
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.token = token
        self.timeout = timeout
        self.stall_timeout = stall_timeout
        self._sleep = sleep
        self._conn = None
        self.requests = 0  # requests sent (retries included)
        self.connects = 0  # connections opened (1 while keep-alive holds)
        self.retries = 0  # requests sent again after a 429/503 or a dropped connection
        self.bytes_in = 0  # response body bytes received

    def _connect(self):
        if self._conn is None:
            if self.scheme == "https":
                self._conn = _Counted(self, http.client.HTTPSConnection)(
                    self.host, self.port, timeout=self.timeout, context=ssl.create_default_context()
                )
            else:
                self._conn = _Counted(self, http.client.HTTPConnection)(self.host, self.port, timeout=self.timeout)
        return self._conn

    def close(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _once(self, method, path, headers, ok, limit, url):
        conn = self._connect()
        conn.request(method, path, headers=headers)
        resp = conn.getresponse()
        if callable(limit) and method != "HEAD" and resp.status in ok:
            limit = limit(resp)
        if method == "HEAD":
            body = bytearray(resp.read())
        elif resp.status in ok and limit is None:
            body = bytearray()  # the caller wants no body of this answer
            self.close()
        elif resp.status in ok:
            body = self._read_body(resp, limit, method, url)
        else:
            body = self._read_body(resp, MAX_PROBLEM, method, url, truncate=True)
        self.bytes_in += len(body)
        if resp.will_close:
            self.close()
        return Response(resp.status, resp.getheaders(), body)

    def _too_large(self, resp, method, url, what, limit):
        self.close()
        return TensorgateError(resp.status, "response_too_large",
                               f"{method} {url}: the answer {what}; the request can return at most {limit} bytes", url=url)

    def _read_body(self, resp, limit, method, url, truncate=False):
        """The body, at most limit bytes, copied into the buffer that becomes the
        array, which grows with the bytes that arrive. A longer
        body raises response_too_large (with truncate: is cut there, the connection
        closed); under STALL_BYTES in stall_timeout seconds raises stalled."""
        length = resp.getheader("Content-Length")
        n = int(length) if length is not None and length.strip().isdigit() else None
        if n is not None and n > limit and not truncate:
            raise self._too_large(resp, method, url, f"announces {n} bytes", limit)
        want = min(n, limit) if n is not None else limit + (0 if truncate else 1)
        body = bytearray(min(want, 1 << 16))
        got = 0
        mark_t, mark_got = time.monotonic(), 0
        while got < want:
            if got == len(body):
                body += bytes(min(len(body), want - len(body)))  # doubles: as much as arrived
            # read1: what one receive brings (readinto would wait to fill the buffer,
            # so a trickle would never be seen)
            chunk = resp.read1(len(body) - got)
            k = len(chunk)
            body[got : got + k] = chunk
            if not k:
                if n is None or truncate:
                    break  # a body without a length ends with the connection
                raise http.client.IncompleteRead(bytes(body[:got]), n - got)
            got += k
            now = time.monotonic()
            if got - mark_got >= STALL_BYTES:
                mark_t, mark_got = now, got
            elif now - mark_t >= self.stall_timeout:
                self.close()
                raise TensorgateError(0, "stalled", f"{method} {url}: fewer than {STALL_BYTES} bytes arrived in "
                                      f"{self.stall_timeout:g} s (stall_timeout)", url=url)
        del body[got:]
        if got > limit:
            raise self._too_large(resp, method, url, "is longer", limit)
        if truncate and (n is None or n > got):
            self.close()  # the rest is not read: this connection cannot carry another request
        elif n is not None:
            resp.read()  # nothing left; lets http.client finish the response
        return body

    def stream(self, method, path, headers=None, body=None, ok=(200,)):
        """Sends method path (with body: bytes, sent with a Content-Length) and
        returns a Body over the live answer when its status is in ok (refusals,
        retries and errors as request() has them). The caller reads the body
        with Body.into / Body.skip straight into its own buffers and ends with
        Body.finish(); any failure while reading must close() the client.
        Used for reads only (GET, and the POST form of the bundle route, a
        read), so a retry is safe."""
        hdrs = self._headers(headers)
        if body is not None:
            hdrs["Content-Type"] = "application/json"
        url = f"{self.scheme}://{self.host}:{self.port}{path}"
        return self._retrying(method, url, lambda: self._stream_once(method, path, hdrs, body, ok, url), ok)

    def _stream_once(self, method, path, headers, body, ok, url):
        conn = self._connect()
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        if resp.status in ok:
            return Body(self, resp, method, url)
        problem = self._read_body(resp, MAX_PROBLEM, method, url, truncate=True)
        self.bytes_in += len(problem)
        if resp.will_close:
            self.close()
        return Response(resp.status, resp.getheaders(), problem)

    def _headers(self, headers):
        hdrs = {"Accept": "application/json, application/octet-stream"}
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        if headers:
            hdrs.update(headers)
        return hdrs

    def _retrying(self, method, url, once, ok):
        """once() (one exchange) until its answer's status is in ok, retrying
        429/503 (Retry-After), 408 and dropped connections a bounded number of
        times; any other status raises the server's problem."""
        attempt = 0
        while True:
            attempt += 1
            self.requests += 1
            try:
                resp = once()
            except ssl.SSLError as e:  # a certificate refused: retrying will not help
                self.close()
                raise TensorgateError(0, "tls_failed", f"{method} {url}: {e}", url=url) from e
            except (http.client.HTTPException, ConnectionError, TimeoutError, OSError) as e:
                # a keep-alive connection the server closed, a reset, a refused
                # connect: reconnect and try again, a bounded number of times
                self.close()
                if attempt > MAX_RETRIES:
                    raise TensorgateError(0, "connection_failed", f"{method} {url}: {e}", url=url) from e
                self.retries += 1
                self._sleep(min(0.1 * (2 ** (attempt - 1)), 2.0))
                continue
            if resp.status in ok:
                return resp
            if resp.status in (429, 503) and attempt <= MAX_RETRIES:
                self.retries += 1
                self._sleep(_retry_after(resp.header("Retry-After")))
                continue
            if resp.status == 408 and attempt <= MAX_RETRIES:
                # the server gave up on an idle kept-alive connection: a new one
                self.close()
                self.retries += 1
                continue
            raise _problem(resp, method, url)

    def request(self, method, path, headers=None, ok=(200,), limit=MAX_JSON):
        """Sends method path; returns a Response whose status is in ok, else
        raises TensorgateError. limit: the most body bytes the request can
        legitimately return (a longer answer is response_too_large), or a
        function of the answer's headers (http.client.HTTPResponse) giving it,
        or None to read no body (the connection is then closed). Only
        idempotent requests (GET, HEAD) are sent through here, so a retry is
        always safe."""
        hdrs = self._headers(headers)
        url = f"{self.scheme}://{self.host}:{self.port}{path}"
        return self._retrying(method, url, lambda: self._once(method, path, hdrs, ok, limit, url), ok)


def _Counted(client, base):
    """base (an http.client connection class) counting its (re)connects on
    client.connects: http.client reopens a closed socket by itself."""

    class Counted(base):
        def connect(self):
            client.connects += 1
            super().connect()

    return Counted


class Body:
    """A response body read in place: into() fills a caller's buffer (a
    writable memoryview of bytes) straight from the connection, one receive at
    a time (no intermediate bytes object when the answer has a Content-Length),
    so each byte is copied once; a body under STALL_BYTES in stall_timeout
    seconds raises stalled, one that ends early raises connection_failed."""

    def __init__(self, client, resp, method, url):
        self.client = client
        self.resp = resp
        self.status = resp.status
        self.method = method
        self.url = url
        self.read = 0  # body bytes consumed so far
        length = resp.getheader("Content-Length")
        self.length = int(length) if length is not None and length.strip().isdigit() else None
        # the direct path: http.client's buffered socket reader, one recv per
        # call, while http.client's own count of what is left is kept right
        self._direct = not resp.chunked and resp.length is not None and hasattr(resp.fp, "readinto1")
        self._mark_t, self._mark_got = time.monotonic(), 0
        self._scratch = None

    def header(self, name, default=None):
        v = self.resp.getheader(name)
        return default if v is None else v

    def _fail(self, reason, detail):
        self.client.close()
        return TensorgateError(0, reason, f"{self.method} {self.url}: {detail}", url=self.url)

    def into(self, mv):
        """Fills mv (a writable byte memoryview) with the next len(mv) body bytes."""
        want = len(mv)
        got = 0
        resp = self.resp
        while got < want:
            if self._direct:
                room = min(want - got, resp.length)
                k = resp.fp.readinto1(mv[got : got + room]) if room else 0
                resp.length -= k
            else:
                chunk = resp.read1(want - got)
                k = len(chunk)
                mv[got : got + k] = chunk
            if not k:
                err = self._fail("connection_failed", f"the body ended after {self.read + got} bytes")
                err.midway = True  # the request was answered: asking again may well work
                raise err
            got += k
            now = time.monotonic()
            if self.read + got - self._mark_got >= STALL_BYTES:
                self._mark_t, self._mark_got = now, self.read + got
            elif now - self._mark_t >= self.client.stall_timeout:
                raise self._fail("stalled", f"fewer than {STALL_BYTES} bytes arrived in "
                                 f"{self.client.stall_timeout:g} s (stall_timeout)")
        self.read += got
        self.client.bytes_in += got
        return mv

    def skip(self, n, sink=None):
        """Reads and drops n bytes (padding between tensors); sink(memoryview)
        sees them first (a digest)."""
        if self._scratch is None:
            self._scratch = memoryview(bytearray(1 << 16))
        while n > 0:
            k = min(n, len(self._scratch))
            part = self.into(self._scratch[:k])
            if sink is not None:
                sink(part)
            n -= k

    def finish(self):
        """The body is over: nothing may be left (a longer answer is refused),
        and the connection is ready for the next request."""
        resp = self.resp
        if self._direct:
            if resp.length:
                raise self._fail("response_too_large", f"{resp.length} bytes more than expected")
            resp.read()  # ends the response (nothing is left to read)
        else:
            extra = resp.read1(1)
            if extra:
                raise self._fail("response_too_large", "more bytes than expected")
            resp.read()
        if resp.will_close:
            self.client.close()


def _problem(resp, method, url):
    problem = {}
    try:
        problem = resp.json()
        if not isinstance(problem, dict):
            problem = {}
    except (ValueError, UnicodeDecodeError):
        problem = {}
    reason = problem.get("reason") or f"http_{resp.status}"
    detail = problem.get("detail") or f"{method} {url} answered {resp.status}"
    return TensorgateError(resp.status, reason, detail, problem, url)
