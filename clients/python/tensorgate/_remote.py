"""safe_open over HTTP: a tensorgate version (every .safetensors file of it, one
key space, through the tensor list route) or one file of it (through its header
route), read tensor by tensor, slice by slice, with the server converting dtypes."""

import collections
import http.client
import json
import operator
import os
import urllib.parse

import numpy as np

from . import _dtypes
from ._http import MAX_RETRIES, Client, TensorgateError
from ._stream import HEADER_CAP, Allocator, Digest, read_safetensors

__all__ = ["safe_open", "RemoteSlice", "RawTensor", "parse_url"]

_FLOATS = {"F64", "F32", "F16", "BF16", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ",
           "F4", "F6_E2M3", "F6_E3M2"}

_FRAMEWORKS = {"np": "np", "numpy": "np", "pt": "pt", "torch": "pt", "pytorch": "pt"}

# The bundle route's bounds (openapi.yaml): selected tensors per request and
# POST body bytes; a request is kept under both (with room for the JSON).
BUNDLE_MAX_TENSORS = 65536
BUNDLE_MAX_BODY = (1 << 20) - 4096
# Characters that make a selector more than a name (a glob, a slice): a tensor
# named with one (or with a name longer than a selector may be) is never sent
# as a selector, but fetched by itself.
_SELECTOR_CHARS = set("*?[]")
_SELECTOR_MAX = 1024


def _selectable(name):
    return not (_SELECTOR_CHARS & set(name)) and len(name.encode("utf-8")) <= _SELECTOR_MAX


def parse_url(url):
    """(base URL, org, name, rev, file path or None) of
    http(s)://host:port/org/name[@rev][/path/file.safetensors]; rev defaults to latest."""
    u = urllib.parse.urlsplit(url)
    if u.scheme not in ("http", "https") or not u.netloc:
        raise ValueError(f"tensorgate: expected http(s)://host:port/org/name@rev[/file], not {url!r}")
    if u.query or u.fragment:
        raise ValueError(f"tensorgate: no query or fragment expected in {url!r}")
    parts = [urllib.parse.unquote(p) for p in u.path.split("/") if p != ""]
    if len(parts) < 2:
        raise ValueError(f"tensorgate: expected /org/name@rev after the host in {url!r}")
    org, name = parts[0], parts[1]
    rev = "latest"
    if "@" in name:
        name, rev = name.split("@", 1)
    if not org or not name or not rev:
        raise ValueError(f"tensorgate: empty org, name or rev in {url!r}")
    path = "/".join(parts[2:]) or None
    return f"{u.scheme}://{u.netloc}", org, name, rev, path


def _q(s, safe=""):
    return urllib.parse.quote(s, safe=safe)


def _slice_item(item, dim):
    """One item of the server's slice= grammar (NumPy basic indexing)."""
    if isinstance(item, slice):
        parts = []
        for v in (item.start, item.stop):
            parts.append("" if v is None else str(operator.index(v)))
        if item.step is None:
            return ":".join(parts)
        step = operator.index(item.step)
        if step == 0:
            raise ValueError("slice step cannot be zero")
        return ":".join(parts) + ":" + str(step)
    try:
        return str(operator.index(item))
    except TypeError:
        raise TypeError(
            f"tensorgate: index {item!r} for dimension {dim} is not an int or a slice "
            "(the server does basic indexing only: ints, slices, Ellipsis)"
        ) from None


def _items(key, rank):
    """A __getitem__ key as one item per indexed dimension (Ellipsis expanded)."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is None for k in key):
        raise TypeError("tensorgate: None (numpy.newaxis) is not supported in a remote slice")
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_ell == 1:
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        fill = rank - (len(key) - 1)
        if fill < 0:
            raise IndexError(f"too many indices for tensor: tensor is {rank}-dimensional, but {len(key) - 1} were indexed")
        key = key[:i] + (slice(None),) * fill + key[i + 1 :]
    if len(key) > rank:
        raise IndexError(f"too many indices for tensor: tensor is {rank}-dimensional, but {len(key)} were indexed")
    return key


def slice_query(key, rank):
    """The slice= value of a __getitem__ key for a tensor of rank dimensions."""
    return ",".join(_slice_item(k, d) for d, k in enumerate(_items(key, rank)))


def selection(key, shape):
    """(slice= value, result shape) of a __getitem__ key on a tensor of shape, as
    NumPy basic indexing: an int out of range raises IndexError here, before any
    request (the client knows the shape)."""
    items = _items(key, len(shape))
    query = ",".join(_slice_item(k, d) for d, k in enumerate(items))
    out = []
    for d, (k, n) in enumerate(zip(items, shape)):
        if isinstance(k, slice):
            out.append(len(range(*slice(*(None if v is None else operator.index(v)
                                          for v in (k.start, k.stop, k.step))).indices(n))))
        else:
            i = operator.index(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {d} with size {n}")
    out.extend(shape[len(items):])
    return query, out


def _nbytes(dtype, shape):
    """The bytes of a dtype's tensor of shape (sub-byte ones rounded up): what a
    request for it can return."""
    n = 1
    for d in shape:
        n *= d
    return (_dtypes.DTYPES[dtype][0] * n + 7) // 8


def _unsafe(path):
    """True when a server-given file path is not safe to show or to use under a
    folder: absolute, an empty, "." or ".." segment, a backslash, or a control
    character (C0, DEL, C1)."""
    if not isinstance(path, str) or not path or path.startswith("/") or "\\" in path:
        return True
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in path):
        return True
    return any(seg in ("", ".", "..") for seg in path.split("/"))


RawTensor = collections.namedtuple("RawTensor", ["data", "dtype", "shape"])


class _Entry:
    __slots__ = ("name", "dtype", "shape", "file", "offsets")

    def __init__(self, name, dtype, shape, file, offsets):
        self.name, self.dtype, self.shape, self.file, self.offsets = name, dtype, list(shape), file, offsets


class RemoteSlice:
    """What get_slice returns: the tensor's shape and dtype, and its values
    fetched (only the selected ones) on indexing, as safetensors' PySafeSlice."""

    def __init__(self, handle, entry):
        self._h = handle
        self._e = entry

    def get_shape(self):
        return list(self._e.shape)

    def get_dtype(self):
        return self._e.dtype

    @property
    def shape(self):
        return tuple(self._e.shape)

    def __len__(self):
        if not self._e.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._e.shape[0]

    def __getitem__(self, key):
        query, shape = selection(key, self._e.shape)
        return self._h._fetch(self._e, query, shape)


class safe_open:
    """safe_open(url, framework="np"|"pt", device="cpu", dtype=None, token=None)

    A remote safetensors file (http(s)://host:port/org/name@rev/path.safetensors)
    or a whole version (http(s)://host:port/org/name@rev: every .safetensors
    file, one key space). Use as a context manager, as safetensors.safe_open.
    token defaults to $TENSORGATE_TOKEN; dtype (e.g. "F32") has the server
    convert every tensor read. verify=True checks the version's
    model.server.sig with the server's published key, verify=PEM (a path or
    PEM bytes) its model.sig with that EC key, against the version's file list,
    before anything is read (TensorgateError signature_* when refused; needs
    the `cryptography` package); .signature then says what was checked.
    prefetch= (a list of tensor names or `*`/`?` globs, or True for every
    tensor) fetches those tensors at open in one request (the server's bundle
    route; tensor by tensor from a server without it); get_tensor then hands
    each out once without another request."""

    def __init__(self, url, framework="np", device="cpu", dtype=None, token=None, timeout=60.0, stall_timeout=30.0,
                 verify=None, prefetch=None):
        fw = _FRAMEWORKS.get(str(framework).lower())
        if fw is None:
            raise ValueError(f"tensorgate: framework {framework!r} is not one of np, numpy, pt, torch")
        if fw == "np" and str(device) != "cpu":
            raise ValueError("tensorgate: NumPy arrays live on the cpu; use framework=\"pt\" for another device")
        if dtype is not None:
            dtype = _dtype_name(dtype)
            if dtype not in _dtypes.CONVERSIONS:
                raise ValueError(f"tensorgate: dtype {dtype!r} is unknown; conversions are to {', '.join(_dtypes.CONVERSIONS)}")
        self.framework = fw
        self.device = device
        self.dtype = dtype
        base, self.org, self.name, rev, self.path = parse_url(url)
        if token is None:
            token = os.environ.get("TENSORGATE_TOKEN") or None
        self._client = Client(base, token=token, timeout=timeout, stall_timeout=stall_timeout)
        self._headers = {}  # file path -> header JSON (read once)
        self._sizes = {}  # file path -> size, from the version's file list
        self._entries = {}  # tensor name -> _Entry, in the server's order
        self._namesakes = {}  # name -> every _Entry of it, while the server's choice is unknown
        self._dups = set()  # names that more than one file holds
        self._prefetched = {}  # name -> array/tensor fetched by prefetch=, handed out once
        self.bundle = None  # False once the server answered that it has no bundle route
        self._verify = verify
        self.signature = None  # with verify=: {"file", "signed"} once checked
        try:
            self._open(rev)
            if prefetch:
                self._prefetched = self.get_tensors(self.keys() if prefetch is True else self._expand(prefetch))
        except BaseException:
            self._client.close()
            raise

    # -- opening ------------------------------------------------------------
    def _vpath(self, rev=None):
        return f"/v1/models/{_q(self.org)}/{_q(self.name)}/versions/{_q(str(rev if rev is not None else self.rev))}"

    def _open(self, rev):
        # pin the version (an alias such as latest may move); its file list gives
        # each file's size, which bounds what a file's download can return
        v = self._client.request("GET", self._vpath(rev)).json()
        self.rev = v.get("version", rev)
        for f in v.get("files") or []:
            path, size = f.get("path"), f.get("size")
            if _unsafe(path):
                raise TensorgateError(0, "unsafe_name", f"the server lists a file named {path!r}: a control character, "
                                      "an absolute path or a '..' segment is never used as a name")
            if not isinstance(size, int) or size < 0:
                raise TensorgateError(0, "bad_response", f"the server lists {path!r} without a size")
            self._sizes[path] = size
        if self._verify is not None and self._verify is not False:
            from ._verify import check_version

            listed = {f.get("path"): f.get("sha256", "") for f in v.get("files") or []}
            self.signature = check_version(self._client, self._vpath(), listed, self._verify)
        if self.path is None:
            # every tensor of the version, across shards, paged
            cursor = None
            while True:
                q = "?limit=10000" + (f"&cursor={_q(cursor)}" if cursor else "")
                page = self._client.request("GET", self._vpath() + "/tensors" + q).json()
                for t in page.get("tensors", []):
                    if t["file"] not in self._sizes:
                        raise TensorgateError(0, "bad_response", f"tensor {t['name']!r} is in {t['file']!r}, "
                                              "which the version does not list")
                    e = _Entry(t["name"], t["dtype"], t["shape"], t["file"], t.get("data_offsets"))
                    if t["name"] not in self._entries:
                        self._entries[t["name"]] = e
                    else:  # a namesake in another file (variants, consolidated beside shards)
                        self._namesakes.setdefault(t["name"], [self._entries[t["name"]]]).append(e)
                        self._dups.add(t["name"])
                cursor = page.get("next_cursor")
                if not cursor:
                    break
        else:
            h = self._header(self.path)
            for t in h.get("tensors", []):
                self._entries[t["name"]] = _Entry(t["name"], t["dtype"], t["shape"], self.path, t.get("data_offsets"))

    def _header(self, path):
        h = self._headers.get(path)
        if h is None:
            h = self._client.request("GET", self._vpath() + "/files/" + _q(path, safe="/") + "/header").json()
            self._headers[path] = h
        return h

    # -- the safetensors API ------------------------------------------------
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def close(self):
        self._client.close()

    def keys(self):
        """Tensor names, sorted (as safetensors' keys())."""
        return sorted(self._entries)

    def offset_keys(self):
        """Tensor names in storage order: files in path order, each by offset."""
        return list(self._entries)

    def metadata(self):
        """The file's __metadata__ (None if it has none); for a whole version,
        every shard's __metadata__ merged (the first file in path order wins)."""
        if self.path is not None:
            return self._header(self.path).get("metadata") or None
        merged = None
        for f in sorted({e.file for e in self._entries.values()}):
            m = self._header(f).get("metadata")
            if m:
                merged = merged or {}
                for k, v in m.items():
                    merged.setdefault(k, v)
        return merged

    def files(self):
        """The .safetensors files behind the keys, in path order."""
        return sorted({e.file for e in self._entries.values()})

    def _entry(self, name):
        e = self._entries.get(name)
        if e is None:
            raise TensorgateError(404, "tensor_not_found", f"no tensor named {name!r} in {self._where()}")
        if name in self._namesakes:
            # several files hold the name: the one the tensor route serves (the
            # index's shard, else the first file in path order), asked once with HEAD
            resp = self._client.request("HEAD", self._vpath() + "/tensors/" + _q(name))
            chosen = resp.header("X-Tensor-File")
            for cand in self._namesakes.pop(name):
                if cand.file == chosen:
                    self._entries[name] = e = cand
        return e

    def _where(self):
        return f"{self.org}/{self.name}@{self.rev}" + (f"/{self.path}" if self.path else "")

    def get_tensor(self, name):
        if name in self._prefetched:
            return self._prefetched.pop(name)
        return self._fetch(self._entry(name), "")

    def get_tensors(self, names):
        """{name: array/tensor} of several tensors (names, in that order; a name
        given twice once), fetched in one request where the server has the
        bundle route, else one by one. An extension: safetensors has no such
        call."""
        order = list(dict.fromkeys(names))
        entries = [self._entry(n) for n in order]
        for e in entries:  # a dtype this framework lacks: before any download
            self._check_dtype(self._target(e))
        out = {}
        plain = [e for e in entries if self._bundleable(e)]
        if self.path is None and any(e.name in self._dups for e in plain):
            groups = _by_file(plain).items()  # namesakes: each file names its tensors
        else:
            groups = [(self.path, plain)] if plain else []
        for file, group in groups:
            got = self._bundled(group, file=file)
            if got is not None:
                out.update(got)
        for e in entries:
            if e.name not in out:
                out[e.name] = self._fetch(e, "")
        return {n: out[n] for n in order}

    def _expand(self, patterns):
        """Names of prefetch= patterns (a `*`/`?` glob, or a name), in the
        patterns' order, each glob's matches in storage order."""
        if isinstance(patterns, str):
            patterns = [patterns]
        names = []
        for p in patterns:
            if not isinstance(p, str):
                raise TypeError(f"tensorgate: prefetch= takes tensor names or globs, not {p!r}")
            if "*" in p or "?" in p:
                rx = _glob(p)
                hits = [n for n in self._entries if rx.fullmatch(n)]
                if not hits:
                    raise TensorgateError(404, "tensor_not_found", f"prefetch {p!r} matches no tensor of {self._where()}")
                names.extend(hits)
            else:
                self._entry(p)
                names.append(p)
        return names

    def get_slice(self, name):
        return RemoteSlice(self, self._entry(name))

    def get_raw(self, name, index=()):
        """RawTensor(data, dtype, shape): the tensor's (or a slice's) bytes as
        the file holds them (little-endian, C order, sub-byte dtypes packed),
        sliced by the server, whatever the framework: the way to read a dtype
        that NumPy or this torch lacks (F4, F6_*, F8_* on torch 1.13). For a
        sub-byte dtype the server needs selections on whole bytes. An extension:
        safetensors has no such call."""
        e = self._entry(name)
        sl, shape = selection(index, e.shape)
        path = self._vpath() + "/tensors/" + _q(e.name) + ("?slice=" + _q(sl, safe=":,-") if sl else "")
        resp = self._client.request("GET", path, limit=self._limit(_nbytes(e.dtype, shape)))
        if self.path is not None and resp.header("X-Tensor-File") not in (None, self.path):
            raise TensorgateError(409, "ambiguous_tensor", f"{name!r} is served from another file of the version; open the version form")
        return RawTensor(bytes(resp.body), resp.header("X-Tensor-Dtype", e.dtype), _shape(resp.header("X-Tensor-Shape")))

    def load_all(self):
        """Every tensor, as a dict in keys() order, in one request where the
        server has the bundle route (dtype= converted by it); else each file
        fetched whole (its SHA-256 checked) and received straight into the
        arrays, or with dtype= tensor by tensor."""
        names = self.keys()
        entries = [self._entry(n) for n in names]
        for e in entries:  # a dtype this framework lacks: before any download
            self._check_dtype(self._target(e))
        got = None
        if any(not e.file.endswith(".safetensors") for e in entries):
            pass  # a GGUF file among them: bundles are safetensors only
        elif not all(self._bundleable(e, named=False) for e in entries):
            pass  # (with dtype=) a tensor the server cannot convert: its own refusal, below
        elif self.path is not None or not self._dups:
            got = self._bundled(entries, file=self.path, whole=True)  # no names sent
        elif all(self._bundleable(e) for e in entries):
            got = {}
            for file, group in _by_file(entries).items():  # namesakes: each file names its tensors
                part = self._bundled(group, file=file)
                if part is None:
                    got = None
                    break
                got.update(part)
        if got is None:
            if self.dtype is not None:
                return {e.name: self._fetch(e, "") for e in entries}
            got = {}
            for file, group in sorted(_by_file(entries).items()):
                got.update(self._load_file(file, group))
        return {n: got[n] for n in names}

    def _load_file(self, file, entries):
        """{name: array/tensor} of a file's tensors (entries), the file fetched
        whole and received straight into them; its SHA-256 checked."""
        want = {e.name: e for e in entries}
        alloc = Allocator(self.framework)

        def take(name, dtype, shape, nbytes):
            e = want.get(name)
            if e is None:
                return None
            if dtype != e.dtype or list(shape) != e.shape:
                raise TensorgateError(0, "bad_response", f"{file}: tensor {name!r} is {dtype} {shape} in the file, "
                                      f"{e.dtype} {e.shape} in the server's list")
            return alloc.new(dtype, shape, nbytes)

        def once():
            # a Range from 0, so a server with --download-redirect still answers here
            body = self._client.stream("GET", self._vpath() + "/files/" + _q(file, safe="/"),
                                       headers={"Range": "bytes=0-"}, ok=(200, 206))
            size = self._size(file)
            if body.length is None or body.length > size:
                self._client.close()
                raise TensorgateError(body.status, "response_too_large", f"{file}: an answer of {body.length} bytes "
                                      f"for a file listed at {size}")
            digest = body.header("X-Content-SHA256")
            total = body.header("Content-Range", "").rpartition("/")[2]
            h = Digest() if digest and (body.status == 200 or total == str(body.length)) else None
            try:
                _, got = read_safetensors(body, take, sink=h.update if h else None, exact=False)
                if h is not None and h.hexdigest() != digest.strip().lower():
                    raise TensorgateError(0, "digest_mismatch", f"{file}: the body's SHA-256 is not {digest}")
            finally:
                if h is not None:
                    h.close()
            return got

        got = self._again(once)
        for e in entries:
            if e.name not in got:
                raise TensorgateError(0, "bad_response", f"{file} has no tensor {e.name!r} although the server listed it")
        return {n: self._place(obj) for n, (obj, _, _) in got.items()}

    def _again(self, once):
        """once() again (a bounded number of times) when the connection failed
        while a body was being read (the request itself is retried by the
        client)."""
        for attempt in range(MAX_RETRIES + 1):
            try:
                return once()
            except (http.client.HTTPException, ConnectionError, TimeoutError, OSError) as e:
                self._client.close()
                if attempt == MAX_RETRIES:
                    raise TensorgateError(0, "connection_failed", str(e)) from e
            except TensorgateError as e:
                if not getattr(e, "midway", False) or attempt == MAX_RETRIES:
                    raise  # a refusal, or a request that could not be sent (already retried)
            self._client.retries += 1

    def _bundleable(self, e, named=True):
        """Whether a tensor can be asked for in a bundle: its name is a plain
        selector (named: it is sent by name), and with dtype= it is one the
        server converts (a bundle keeps the bytes of the others, where the
        tensor route refuses them)."""
        if named and not _selectable(e.name):
            return False
        return not (self.dtype and e.dtype in _FLOATS and e.dtype not in _dtypes.CONVERSIONS)

    def _bundled(self, entries, file=None, whole=False):
        """{name: array/tensor} of entries from the bundle route (one request, a
        few when a selection exceeds the route's bounds), or None where the
        server cannot bundle them: an older server without the route (then
        never asked again), a GGUF file, a name the server finds ambiguous.
        whole: entries are every tensor of the version (of file), asked for by
        naming none."""
        if self.bundle is False or not entries:
            return None if self.bundle is False else {}
        if whole and len(entries) <= BUNDLE_MAX_TENSORS:
            q = [("file", file)] if file else []
            if self.dtype:
                q.append(("dtype", self.dtype))
            path = self._vpath() + "/bundle" + ("?" + urllib.parse.urlencode(q, quote_via=urllib.parse.quote) if q else "")
            return self._bundle_request("GET", path, None, entries)
        out = {}
        for batch in _batches(entries, file, self.dtype):
            req = {"tensors": [e.name for e in batch]}
            if self.dtype:
                req["dtype"] = self.dtype
            if file:
                req["file"] = file
            got = self._bundle_request("POST", self._vpath() + "/bundle", json.dumps(req).encode(), batch)
            if got is None:
                return None
            out.update(got)
        return out

    def _bundle_request(self, method, path, payload, entries):
        expect = {e.name: (self._target(e), e.shape) for e in entries}
        alloc = Allocator(self.framework)

        def take(name, dtype, shape, nbytes):
            exp = expect.get(name)
            if exp is None:
                raise TensorgateError(0, "bad_response", f"the bundle holds {name!r}, which was not asked for")
            if (dtype, list(shape)) != exp:
                raise TensorgateError(0, "bad_response", f"the bundle's {name!r} is {dtype} {shape}, not {exp[0]} {exp[1]}")
            return alloc.new(dtype, shape, nbytes)

        def once():
            try:
                body = self._client.stream(method, path, body=payload)
            except TensorgateError as err:
                if err.status in (404, 405) and err.reason in ("not_found", "method_not_allowed"):
                    self.bundle = False  # an older server: no bundle route
                    return None
                if (err.status, err.reason) in ((409, "ambiguous_tensor"), (422, "unsupported_tensor")):
                    return None
                raise
            self.bundle = True
            want = sum(_nbytes(t, sh) for t, sh in expect.values())
            if body.length is not None and body.length > 8 + HEADER_CAP + want:
                self._client.close()
                raise TensorgateError(body.status, "response_too_large", f"{method} {body.url}: the answer announces "
                                      f"{body.length} bytes; {want} tensor bytes and a header were asked for")
            _, got = read_safetensors(body, take, want=want)
            return got

        got = self._again(once)
        if got is None:
            return None
        missing = [n for n in expect if n not in got]
        if missing:
            raise TensorgateError(0, "bad_response",
                                  f"the bundle lacks {len(missing)} tensors asked for, such as {missing[0]!r}")
        return {n: self._place(obj) for n, (obj, _, _) in got.items()}

    def _place(self, obj):
        if self.framework == "pt" and self.device and str(self.device) != "cpu":
            return obj.to(self.device)
        return obj

    # -- fetching -----------------------------------------------------------
    def _target(self, e):
        """The dtype a tensor is served in: dtype= applies to floating-point
        tensors (not C64); integer and bool tensors come as they are."""
        if self.dtype and e.dtype in _FLOATS:
            return self.dtype
        return e.dtype

    def _check_dtype(self, dtype):
        """TypeError when this framework has no such dtype (before any transfer)."""
        if self.framework == "np":
            _dtypes.numpy_dtype(dtype)
        else:
            _dtypes.torch_dtype(dtype)

    def _limit(self, nbytes):
        """The body bound of a tensor answer: nbytes; in the one-file form, an
        answer from another file of the version (a namesake the server chose) is
        not read at all (the caller reads this file's bytes by Range)."""
        if self.path is None:
            return nbytes
        return lambda resp: nbytes if resp.getheader("X-Tensor-File") in (None, self.path) else None

    def _size(self, file):
        size = self._sizes.get(file)
        if size is None:
            raise TensorgateError(0, "bad_response", f"{file!r} is not in the version's file list")
        return size

    def _fetch(self, e, sl, shape=None):
        served = self._target(e)
        self._check_dtype(served)
        q = []
        if sl:
            q.append("slice=" + _q(sl, safe=":,-"))
        if served != e.dtype:
            q.append("dtype=" + served)
        path = self._vpath() + "/tensors/" + _q(e.name) + ("?" + "&".join(q) if q else "")
        limit = _nbytes(served, e.shape if shape is None else shape)

        def once():
            # the body is received straight into the new array / tensor
            body = self._client.stream("GET", path)
            try:
                file = body.header("X-Tensor-File")
                if self.path is not None and file is not None and file != self.path:
                    self._client.close()  # a namesake in another file: not read
                    return None
                if body.length is not None and body.length > limit:
                    raise TensorgateError(body.status, "response_too_large", f"GET {body.url}: the answer announces "
                                          f"{body.length} bytes; the request can return at most {limit} bytes")
                dtype = body.header("X-Tensor-Dtype", served)
                shp = _shape(body.header("X-Tensor-Shape"))
                if dtype not in _dtypes.DTYPES or any(d < 0 for d in shp):
                    raise TensorgateError(0, "bad_response", f"GET {body.url}: a {dtype} {shp} tensor")
                n = _nbytes(dtype, shp)
                if n > limit:
                    raise TensorgateError(body.status, "response_too_large", f"GET {body.url}: a {dtype} {shp} tensor "
                                          f"has {n} bytes; the request can return at most {limit} bytes")
                if body.length is not None and body.length != n:
                    raise TensorgateError(0, "bad_response",
                                          f"GET {body.url}: {body.length} bytes for a {dtype} {shp} tensor")
                obj, mv = Allocator(self.framework).new(dtype, shp, n)
                body.into(mv)
                body.finish()
                return obj
            except BaseException:
                self._client.close()
                raise

        got = self._again(once)
        if got is None:
            # the version has another tensor of that name which the server chose:
            # read this file's bytes by range and index them here
            return self._fetch_from_file(e, key_query=sl)
        return self._place(got)

    def _fetch_from_file(self, e, key_query):
        """The tensor of this handle's file by Range, indexed and converted here
        (bit for bit as the server would: torch's .to(), NumPy's astype)."""
        b, end = e.offsets
        if end == b:
            body = bytearray()
        else:
            resp = self._client.request(
                "GET", self._vpath() + "/files/" + _q(self.path, safe="/"), headers={"Range": f"bytes={b}-{end - 1}"}, ok=(206, 200),
                limit=self._size(self.path),
            )
            if resp.status == 206 and len(resp.body) > end - b:
                raise TensorgateError(206, "response_too_large", f"{self.path}: {len(resp.body)} bytes for a range of {end - b}")
            body = resp.body if resp.status == 206 else resp.body[b:end]
        shape = list(e.shape)
        if key_query:
            # index the elements as same-width unsigned integers (NumPy handles
            # negative steps; torch does not), then build the real dtype
            bits = _dtypes.DTYPES[e.dtype][0]
            if bits % 8:
                raise TypeError(f"tensorgate: cannot index a {e.dtype} tensor locally")
            width = {1: "u1", 2: "<u2", 4: "<u4", 8: "<u8"}[bits // 8]
            sel = np.frombuffer(body, dtype=width).reshape(shape)[_parse_query(key_query)]
            shape = list(sel.shape)
            body = bytearray(np.ascontiguousarray(sel).tobytes())
        target = self._target(e)
        if target == e.dtype:
            return self._build(body, e.dtype, shape)
        if self.framework == "pt":
            return _dtypes.to_torch(body, e.dtype, shape).to(_dtypes.torch_dtype(target)).to(self.device)
        if e.dtype == "BF16":
            src = (np.frombuffer(body, dtype="<u2").astype(np.uint32) << 16).view(np.float32).reshape(shape)
        else:
            src = _dtypes.to_numpy(body, e.dtype, shape)
        return src.astype(_dtypes.numpy_dtype(target))

    def _build(self, body, dtype, shape):
        if self.framework == "np":
            return _dtypes.to_numpy(body, dtype, shape)
        return _dtypes.to_torch(body, dtype, shape, self.device)


def _by_file(entries):
    groups = {}
    for e in entries:
        groups.setdefault(e.file, []).append(e)
    return groups


def _batches(entries, file, dtype):
    """entries cut into bundle requests each under the route's bounds."""
    batch, size = [], 64 + len(json.dumps(file or "")) + len(dtype or "")
    for e in entries:
        k = len(json.dumps(e.name)) + 2
        if batch and (len(batch) == BUNDLE_MAX_TENSORS or size + k > BUNDLE_MAX_BODY):
            yield batch
            batch, size = [], 64 + len(json.dumps(file or "")) + len(dtype or "")
        batch.append(e)
        size += k
    if batch:
        yield batch


def _glob(pattern):
    """A compiled regex of a selector glob: `*` any run, `?` one character."""
    import re

    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.S)


def _dtype_name(dtype):
    """Accepts "F32", a NumPy dtype (np.float32) or a torch dtype (torch.float32)."""
    if isinstance(dtype, str):
        return dtype
    s = str(dtype)
    table = {
        "torch.float64": "F64",
        "torch.float32": "F32",
        "torch.float16": "F16",
        "torch.bfloat16": "BF16",
        "torch.float8_e4m3fn": "F8_E4M3",
        "torch.float8_e5m2": "F8_E5M2",
    }
    if s in table:
        return table[s]
    try:
        import numpy as np

        return {"float64": "F64", "float32": "F32", "float16": "F16"}[np.dtype(dtype).name]
    except (TypeError, KeyError):
        raise ValueError(f"tensorgate: dtype {dtype!r} is not one of {', '.join(_dtypes.CONVERSIONS)}") from None


def _shape(value):
    if value is None:
        raise TensorgateError(0, "bad_response", "the server sent no X-Tensor-Shape")
    v = value.strip()
    if not (v.startswith("[") and v.endswith("]")):
        raise TensorgateError(0, "bad_response", f"X-Tensor-Shape {value!r} is not a JSON array")
    inner = v[1:-1].strip()
    return [int(x) for x in inner.split(",")] if inner else []


def _parse_query(q):
    items = []
    for part in q.split(","):
        if ":" in part:
            bits = [int(x) if x else None for x in part.split(":")]
            items.append(slice(*bits))
        else:
            items.append(int(part))
    return tuple(items)
