"""Safetensors bytes read off a response straight into the arrays / tensors
they become: the 8-byte length and the JSON header first, then each tensor's
bytes received into its own freshly allocated buffer (numpy.empty, or a torch
uint8 tensor viewed as the dtype: BF16 included), so each byte is copied once
from the socket. Used for a whole .safetensors file and for a bundle (the
batched tensor route, one safetensors stream of the selected tensors)."""

import hashlib
import json
import queue
import struct
import threading

import numpy as np

from . import _dtypes
from ._http import TensorgateError

__all__ = ["Allocator", "read_safetensors", "HEADER_CAP", "Digest"]

# The safetensors header cap (the format's, and the server's bundle bound).
HEADER_CAP = 100_000_000
# A tensor is received (and handed to the sink) in pieces of at most this many
# bytes, so a digest of one piece runs while the next arrives.
PIECE = 8 << 20


class Digest:
    """SHA-256 of a stream computed on a second thread while the stream is
    being received (hashlib lets go of the GIL on large updates, the receive
    too): update(mv, stable) queues mv (copied first unless stable: a buffer
    that is not written again, such as a tensor's own), hexdigest() waits for
    the queue. Two cores then do in parallel what one did in turn."""

    def __init__(self):
        self._h = hashlib.sha256()
        self._q = queue.SimpleQueue()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while True:
            mv = self._q.get()
            if mv is None:
                return
            self._h.update(mv)

    def update(self, mv, stable=False):
        self._q.put(mv if stable else bytes(mv))

    def hexdigest(self):
        self.close()
        return self._h.hexdigest()

    def close(self):
        if self._t.is_alive():
            self._q.put(None)
            self._t.join()


def _bad(body, detail):
    body.client.close()
    return TensorgateError(0, "bad_response", f"{body.method} {body.url}: {detail}", url=body.url)


class Allocator:
    """New arrays (framework "np") or tensors ("pt") for a dtype and shape,
    with a writable byte view of their memory to receive into."""

    def __init__(self, framework):
        self.framework = framework
        if framework == "pt":
            import torch

            self._torch = torch

    def check(self, dtype):
        """TypeError when this framework has no such dtype."""
        if self.framework == "np":
            _dtypes.numpy_dtype(dtype)
        else:
            _dtypes.torch_dtype(dtype)

    def new(self, dtype, shape, nbytes):
        if self.framework == "np":
            a = np.empty(tuple(shape), dtype=_dtypes.numpy_dtype(dtype))
            return a, memoryview(a.reshape(-1).view(np.uint8))
        torch = self._torch
        td = _dtypes.torch_dtype(dtype)
        raw = torch.empty(nbytes, dtype=torch.uint8)
        # the same memory as the dtype (uint8 -> bfloat16 halves the length)
        t = raw.view(td).reshape(tuple(shape)) if nbytes else torch.empty(tuple(shape), dtype=td)
        return t, memoryview(raw.numpy())


def _grow_read(body, n):
    """n bytes of the body into a buffer that grows with what arrives (a
    header length is the server's word: no allocation of it up front)."""
    buf = bytearray(min(n, 1 << 16))
    got = 0
    while got < n:
        if got == len(buf):
            buf += bytes(min(len(buf), n - len(buf)))
        body.into(memoryview(buf)[got:])  # a temporary view: buf can grow again
        got = len(buf)
    return buf


def read_safetensors(body, alloc, header_limit=HEADER_CAP, sink=None, exact=True, want=None):
    """Reads a safetensors stream off body (an _http.Body) and returns
    (header dict, {name: (array, dtype, shape)}) in data order.
    alloc(name, dtype, shape, nbytes) -> (object, writable byte memoryview)
    or None (the tensor's bytes are read and dropped). sink(memoryview,
    stable) sees every byte of the stream, in order (Digest.update); stable
    says the view's bytes stay as they are (a tensor's own buffer).
    exact: the body is exactly 8 + header + data (a bundle); else bytes after
    the last tensor are read and passed to sink (a file). want: the most data
    bytes the caller accepts (the sum of what it asked for), checked before any
    tensor buffer is allocated."""
    try:
        return _read(body, alloc, header_limit, sink, exact, want)
    except BaseException:
        body.client.close()  # the rest of the body is not read: the connection cannot go on
        raise


def _read(body, alloc, header_limit, sink, exact, want):
    prefix = bytearray(8)
    body.into(memoryview(prefix))
    if sink is not None:
        sink(memoryview(prefix))
    (n,) = struct.unpack("<Q", prefix)
    if n > header_limit:
        raise _bad(body, f"a header of {n} bytes, more than {header_limit}")
    if body.length is not None and n > body.length - 8:
        raise _bad(body, f"a header of {n} bytes in a body of {body.length}")
    raw = _grow_read(body, n)
    if sink is not None:
        sink(memoryview(raw), True)
    try:
        header = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _bad(body, f"the safetensors header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise _bad(body, "the safetensors header is not a JSON object")
    items = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
            ok = (dtype in _dtypes.DTYPES and isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)
                  and isinstance(b, int) and isinstance(e, int) and 0 <= b <= e)
        except (TypeError, KeyError, ValueError):
            ok = False
        if not ok:
            raise _bad(body, f"tensor {name!r} has a malformed header entry")
        nbytes = (_dtypes.DTYPES[dtype][0] * _count(shape) + 7) // 8
        if e - b != nbytes:
            raise _bad(body, f"tensor {name!r} has {e - b} bytes for {dtype} {shape}")
        items.append((b, e, name, dtype, shape))
    items.sort(key=lambda t: (t[0], t[1]))
    end = 0
    for b, e, name, _, _ in items:
        if b < end:
            raise _bad(body, f"tensor {name!r} overlaps the one before it")
        end = e
    if body.length is not None:
        have = body.length - 8 - n
        if end > have or (exact and end != have):
            raise _bad(body, f"the header's tensors hold {end} bytes, the body {have}")
    if want is not None and end > want:
        raise _bad(body, f"the answer holds {end} tensor bytes, more than the {want} asked for")
    out = {}
    pos = 0
    for b, e, name, dtype, shape in items:
        if b > pos:
            body.skip(b - pos, sink)
        got = alloc(name, dtype, shape, e - b)
        if got is None:
            body.skip(e - b, sink)
        else:
            obj, mv = got
            for at in range(0, len(mv), PIECE):
                piece = body.into(mv[at : at + PIECE])
                if sink is not None:
                    sink(piece, True)
            out[name] = (obj, dtype, shape)
        pos = e
    if body.length is not None and not exact:
        body.skip(body.length - 8 - n - pos, sink)
    body.finish()
    return header, out


def _count(shape):
    n = 1
    for d in shape:
        n *= d
    return n
