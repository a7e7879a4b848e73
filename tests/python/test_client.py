"""Checks of the Python client (clients/python, package tensorgate) against real
tensorgate servers started by tests/python/run.sh. Publishes models with urllib,
then reads them back with safe_open / load_file / load and compares every value
with NumPy indexing / torch on the original arrays.

usage: test_client.py PLAIN_URL PLAIN_TOKEN LIMITED_URL LIMITED_TOKEN [HTTPS_URL|- CA_FILE]"""

import json
import os
import struct
import sys
import time
import traceback
import urllib.error
import urllib.request

import numpy as np
import torch

import tensorgate
import tensorgate.numpy
import tensorgate.torch
from tensorgate import TensorgateError, safe_open
from tensorgate._http import Client

PASSED = 0
FAILED = 0


def check(name, cond, info=""):
    global PASSED, FAILED
    if cond:
        PASSED += 1
    else:
        FAILED += 1
        print(f"FAIL: {name} {info}")


def check_raises(name, fn, exc=TensorgateError, reason=None, status=None, contains=None):
    try:
        fn()
    except exc as e:
        ok = True
        if reason is not None and getattr(e, "reason", None) != reason:
            ok = False
        if status is not None and getattr(e, "status", None) != status:
            ok = False
        if contains is not None and contains not in str(e):
            ok = False
        check(name, ok, f"got {type(e).__name__}: {e} (reason={getattr(e, 'reason', None)})")
        return e
    except Exception as e:  # noqa: BLE001
        check(name, False, f"raised {type(e).__name__}: {e}")
        return None
    check(name, False, "raised nothing")
    return None


# ---------------------------------------------------------------- writing
def raw(dtype, shape, data):
    return (dtype, list(shape), bytes(data))


def st_bytes(tensors, metadata=None):
    """safetensors bytes of {name: (dtype, shape, bytes)}, data in dict order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off = 0
    for name, (dtype, shape, b) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(b)]}
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(b for _, _, b in tensors.values())


NP_NAME = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("float64"): "F64",
           np.dtype("int8"): "I8", np.dtype("int64"): "I64", np.dtype("uint8"): "U8",
           np.dtype("bool"): "BOOL", np.dtype("int32"): "I32", np.dtype("int16"): "I16"}


def from_np(a):
    return raw(NP_NAME[a.dtype], a.shape, np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes())


def from_bf16(t):
    return raw("BF16", t.shape, t.contiguous().view(torch.int16).numpy().tobytes())


def http(method, url, token, body=None, retry=True):
    for _ in range(50):
        req = urllib.request.Request(url, data=body, method=method)
        req.add_header("Authorization", "Bearer " + token)
        if body is not None:
            req.add_header("Content-Type", "application/octet-stream")
        try:
            with urllib.request.urlopen(req) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            if e.code == 429 and retry:
                time.sleep(float(e.headers.get("Retry-After") or 1))
                continue
            raise RuntimeError(f"{method} {url}: {e.code} {e.read()[:300]!r}") from None
    raise RuntimeError(f"{method} {url}: rate limited 50 times")


def publish(base, token, model, files):
    http("POST", base + "/v1/models", token, json.dumps({"name": model}).encode())
    _, body = http("POST", f"{base}/v1/models/{model}/versions", token, b"")
    v = json.loads(body)["version"]
    for path, data in files.items():
        http("PUT", f"{base}/v1/models/{model}/versions/{v}/files/{path}", token, data)
    http("POST", f"{base}/v1/models/{model}/versions/{v}/publish", token, b"")
    return v


# ---------------------------------------------------------------- reference F8
def f8_e4m3_to_f32(b):
    out = np.empty(len(b), dtype=np.float32)
    for i, x in enumerate(b):
        s = -1.0 if x & 0x80 else 1.0
        e = (x >> 3) & 0xF
        m = x & 7
        if e == 15 and m == 7:
            out[i] = np.nan
        elif e == 0:
            out[i] = s * (m / 8.0) * 2.0 ** -6
        else:
            out[i] = s * (1 + m / 8.0) * 2.0 ** (e - 7)
    return out


# ---------------------------------------------------------------- the models
rng = np.random.default_rng(12)
EMBED = rng.standard_normal((50, 24)).astype(np.float32)
NORM = rng.standard_normal(24).astype(np.float16)
LM_HEAD = rng.standard_normal((12, 3072)).astype(np.float32)
LAYER = rng.integers(-2**40, 2**40, size=(7, 5, 3), dtype=np.int64)

BF16 = torch.randn(6, 10).to(torch.bfloat16)
F16 = rng.standard_normal((5, 4)).astype(np.float16)
F32 = rng.standard_normal((3, 4, 5)).astype(np.float32)
I8 = rng.integers(-128, 128, size=9, dtype=np.int8)
I64 = rng.integers(-2**62, 2**62, size=(4, 4), dtype=np.int64)
BOOL = rng.integers(0, 2, size=(3, 3)).astype(np.bool_)
U8 = rng.integers(0, 256, size=10, dtype=np.uint8)
F64 = rng.standard_normal((2, 3))
F8 = np.array([x for x in range(256) if (x & 0x7F) != 0x7F][:64], dtype=np.uint8).reshape(4, 16)
SCALAR = np.array(3.5, dtype=np.float32)
EMPTY = np.zeros((0, 3), dtype=np.float32)

SHARD1 = st_bytes({"model.embed.weight": from_np(EMBED), "model.norm.weight": from_np(NORM)}, {"format": "pt"})
SHARD2 = st_bytes({"lm_head.weight": from_np(LM_HEAD), "model.layers.0.w": from_np(LAYER)},
                  {"format": "pt", "note": "second"})
INDEX = json.dumps({"metadata": {"total_size": EMBED.nbytes + NORM.nbytes + LM_HEAD.nbytes + LAYER.nbytes},
                    "weight_map": {"model.embed.weight": "model-00001-of-00002.safetensors",
                                   "model.norm.weight": "model-00001-of-00002.safetensors",
                                   "lm_head.weight": "model-00002-of-00002.safetensors",
                                   "model.layers.0.w": "model-00002-of-00002.safetensors"}}).encode()
SHARDED = {"model.embed.weight": EMBED, "model.norm.weight": NORM, "lm_head.weight": LM_HEAD, "model.layers.0.w": LAYER}

MIXED_T = {"bf16": from_bf16(BF16), "f16": from_np(F16), "f32": from_np(F32), "i8": from_np(I8),
           "i64": from_np(I64), "bool": from_np(BOOL), "u8": from_np(U8), "f64": from_np(F64),
           "f8": raw("F8_E4M3", F8.shape, F8.tobytes()), "scalar": from_np(SCALAR), "empty": from_np(EMPTY)}
MIXED = st_bytes(MIXED_T, {"format": "pt", "kind": "mixed"})
MIXED_NP = {"f16": F16, "f32": F32, "i8": I8, "i64": I64, "bool": BOOL, "u8": U8, "f64": F64,
            "scalar": SCALAR, "empty": EMPTY}
EXTRA = st_bytes({"x": from_np(np.arange(6, dtype=np.int32).reshape(2, 3))})

KEYS_2D = [
    (slice(None), slice(1024, 2048)),
    3, -1, slice(None, None, 2), slice(None, None, -1), slice(5, 1, -2), (slice(1, -1), slice(None, None, -3)),
    (Ellipsis, 7), (2, slice(100, 10, -7)), (slice(None), slice(-5, None)), slice(None, 0), slice(100, None),
    slice(-100, 100), (slice(None), -1), (-12, 0), (slice(None, None, -5), slice(3000, None, -1000)),
    (slice(2, 2), slice(None)), (slice(10, 2), slice(None)), (slice(None, None, 7), slice(1, 3072, 1535)),
]
KEYS_3D = [
    (1,), (slice(None), 2), (slice(None), slice(None), -1), (-1, slice(None, None, -1), slice(1, None, 2)),
    (Ellipsis,), (Ellipsis, slice(None, None, -2)), (6, 4, 2), (slice(6, None, -3), slice(None), slice(None, 1)),
]


def eq(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


def hostile_checks():
    """The client against a hostile peer (tests/client/hostile_peer.py, in this
    process): bounded bodies, local refusals, no request where none is needed."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "client"))
    import hostile_peer

    srv, stats = hostile_peer.start()
    peer = f"http://127.0.0.1:{srv.server_address[1]}"
    try:
        # a 14-byte answer claiming 4 GiB: the client's own error, no allocation
        # (a child process under a 2 GiB address-space limit, its peak RSS measured)
        code = ("import resource, sys\n"
                "resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"
                "sys.modules['torch'] = None\n"
                "import tensorgate, tensorgate.numpy\n"
                "out = []\n"
                "for what in ('tensor', 'file', 'header'):\n"
                "    try:\n"
                "        if what == 'tensor':\n"
                f"            with tensorgate.safe_open({peer + '/acme/huge@1'!r}) as f: f.get_tensor('w')\n"
                "        elif what == 'file':\n"
                f"            tensorgate.numpy.load_file({peer + '/acme/huge@1'!r})\n"
                "        else:\n"
                f"            tensorgate.safe_open({peer + '/acme/huge@1/model.safetensors'!r})\n"
                "        out.append(what + ':none')\n"
                "    except tensorgate.TensorgateError as e:\n"
                "        out.append(what + ':' + e.reason)\n"
                "    except BaseException as e:\n"
                "        out.append(what + ':' + type(e).__name__)\n"
                "print(' '.join(out), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n")
        import subprocess
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        words = r.stdout.split()
        check("4 GiB claimed, 14 bytes sent: response_too_large for a tensor, a file, a header",
              words[:3] == ["tensor:response_too_large", "file:response_too_large", "header:response_too_large"],
              r.stdout + r.stderr[-500:])
        check("4 GiB claimed: peak RSS stays small", len(words) == 4 and int(words[3]) < 300 * 1024, r.stdout)

        # an index out of range: IndexError, not a request
        with safe_open(peer + "/acme/fine@1") as f:
            s = f.get_slice("w")
            n = len(stats.snapshot()["paths"])
            check_raises("peer: get_slice index 4 of 4 rows", lambda: s[4], IndexError)
            check_raises("peer: get_slice index -4 of 3 columns", lambda: s[:, -4], IndexError)
            check_raises("peer: get_raw index out of range", lambda: f.get_raw("w", (0, 3)), IndexError)
            check("peer: no request for an index out of range", len(stats.snapshot()["paths"]) == n,
                  stats.snapshot()["paths"][n:])
            check("peer: an index in range still fetches", eq(s[:], np.arange(12, dtype=np.float32).reshape(4, 3)))
            # the peer answers a row with the whole tensor: more than a row can be
            check_raises("peer: more bytes than the slice holds", lambda: s[1], reason="response_too_large")

        # BF16 with NumPy: TypeError before a byte of the file is served
        before = stats.snapshot()
        check_raises("peer: numpy.load_file of a BF16 file: TypeError", lambda: tensorgate.numpy.load_file(peer + "/acme/fine@1"),
                     TypeError, contains="BF16")
        after = stats.snapshot()
        check("peer: BF16 refused before the download", after["file_bytes"] == before["file_bytes"]
              and not any("/files/" in p for p in after["paths"][len(before["paths"]):]),
              f"{after['file_bytes'] - before['file_bytes']} bytes, {after['paths'][len(before['paths']):]}")

        # the bundle route (the batched tensor route) of the peer: one request
        # for a whole version, bytes straight into the tensors; a bundle that
        # lies about what it holds is refused
        n = len(stats.snapshot()["paths"])
        d = tensorgate.torch.load_file(peer + "/acme/fine@1")
        paths = stats.snapshot()["paths"][n:]
        check("peer bundle: torch.load_file is one bundle request after the listing",
              [p for p in paths if "/bundle" in p or "/files/" in p or "/tensors/" in p]
              == ["GET /v1/models/acme/fine/versions/1/bundle"], paths)
        check("peer bundle: F32 and BF16 values", torch.equal(d["w"], torch.arange(12, dtype=torch.float32).reshape(4, 3))
              and d["h"].dtype == torch.bfloat16 and d["h"].view(torch.uint8).numpy().tobytes() == bytes(range(8)), d)
        with safe_open(peer + "/acme/fine@1", framework="pt", prefetch=["h", "w"]) as f:
            n = len(stats.snapshot()["paths"])
            t = f.get_tensor("w")
            check("peer bundle: prefetch= then get_tensor: no request", len(stats.snapshot()["paths"]) == n
                  and torch.equal(t, torch.arange(12, dtype=torch.float32).reshape(4, 3)))
        with safe_open(peer + "/acme/flaky@1", framework="pt") as f:
            d = f.load_all()
            check("peer bundle: a body cut halfway is asked for again", f._client.retries == 1 and
                  torch.equal(d["w"], torch.arange(12, dtype=torch.float32).reshape(4, 3)), f._client.retries)
        for model, reason in (("stranger", "bad_response"), ("reshaped", "bad_response"), ("padded", "bad_response"),
                              ("huge", "response_too_large")):
            with safe_open(peer + f"/acme/{model}@1") as f:
                check_raises(f"peer bundle {model}: load_all refused", lambda: f.load_all(), reason=reason)
                check_raises(f"peer bundle {model}: get_tensors refused", lambda: f.get_tensors(["w"]), reason=reason)

        # server-given file names with control characters are refused at open
        check_raises("peer: file names with terminal escapes", lambda: safe_open(peer + "/acme/escape@1"),
                     reason="unsafe_name")
        # a trickle (4 bytes every 2 s) stalls, not retried
        t0 = time.monotonic()
        with safe_open(peer + "/acme/trickle@1", stall_timeout=3) as f:
            check_raises("peer: a trickling body is stalled", lambda: f.load_all(), reason="stalled")
        check("peer: stalled within the stall timeout", time.monotonic() - t0 < 8, time.monotonic() - t0)
        # a 500 whose problem body never ends: cut at its bound, the status reported
        t0 = time.monotonic()
        check_raises("peer: an endless problem body", lambda: safe_open(peer + "/acme/errflood@1"), status=500)
        check("peer: an endless problem body, at once", time.monotonic() - t0 < 10, time.monotonic() - t0)
        # an endless body for a file listed at 4176 bytes: bounded by the size
        with safe_open(peer + "/acme/endless@1") as f:
            check_raises("peer: an endless body is response_too_large", lambda: f.load_all(), reason="response_too_large")
    finally:
        srv.shutdown()
        srv.server_close()


BUNDLE = False  # whether the server under test has the bundle route (set in main)


def has_bundle(base):
    """True when the server has the batched tensor route (an older one answers
    404 not_found: no such route)."""
    cl = Client(base)
    try:
        cl.request("GET", "/v1/models/acme/llm/versions/latest/bundle?tensors=no.such.tensor")
    except TensorgateError as e:
        return not (e.status == 404 and e.reason == "not_found")
    finally:
        cl.close()
    return True


def file_tensors(path):
    """{name: (dtype, shape, bytes)} of a local .safetensors file, read here with
    numpy.fromfile (independently of the client)."""
    (n,) = np.fromfile(path, dtype="<u8", count=1)
    header = json.loads(np.fromfile(path, dtype=np.uint8, count=int(n), offset=8).tobytes())
    out = {}
    for name, info in header.items():
        if name != "__metadata__":
            b, e = info["data_offsets"]
            data = np.fromfile(path, dtype=np.uint8, count=e - b, offset=8 + int(n) + b).tobytes()
            out[name] = (info["dtype"], info["shape"], data)
    return out


def same_bytes(got, ref, framework):
    """Every tensor of got (a load_file dict) holds exactly ref's bytes, dtype and shape."""
    if sorted(got) != sorted(ref):
        return f"names {sorted(got)} vs {sorted(ref)}"
    for name, (dtype, shape, data) in ref.items():
        t = got[name]
        if framework == "pt":
            if not isinstance(t, torch.Tensor) or t.dtype != tensorgate._dtypes.torch_dtype(dtype):
                return f"{name}: {type(t).__name__} {getattr(t, 'dtype', None)} for {dtype}"
            raw = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        else:
            if not isinstance(t, np.ndarray) or t.dtype != tensorgate._dtypes.numpy_dtype(dtype) or not t.flags.writeable:
                return f"{name}: {type(t).__name__} {getattr(t, 'dtype', None)} for {dtype}"
            raw = t.tobytes()
        if list(t.shape) != shape or raw != data:
            return f"{name}: shape {list(t.shape)} vs {shape}, bytes equal: {raw == data}"
    return None


def batched_checks(base, token):
    """load_file of a whole version and safe_open(prefetch=) / get_tensors: one
    bundle request (an older server: its 404, then a request per file or per
    tensor), every byte compared with the published files read from disk."""
    import tempfile

    g = torch.Generator().manual_seed(7)
    bf = torch.randn(33, 17, generator=g).to(torch.bfloat16)
    rng = np.random.default_rng(7)
    shard_a = st_bytes({"a.f32": from_np(rng.standard_normal((64, 129)).astype(np.float32)),
                        "a.bf16": from_bf16(bf), "a.f16": from_np(rng.standard_normal(1001).astype(np.float16)),
                        "a.scalar": from_np(np.array(2.5, dtype=np.float32)),
                        "a.empty": from_np(np.zeros((0, 5), dtype=np.float16))}, {"format": "pt"})
    shard_b = st_bytes({"b.i64": from_np(rng.integers(-2**40, 2**40, (7, 9))), "b.bool": from_np(rng.random(31) < 0.5),
                        "b.u8": from_np(rng.integers(0, 255, 4099).astype(np.uint8)),
                        "b.glob*name?": from_np(np.arange(6, dtype=np.int16)),
                        "b.bf16": from_bf16(torch.randn(1024, generator=g).to(torch.bfloat16))})
    files = {"model-00001-of-00002.safetensors": shard_a, "model-00002-of-00002.safetensors": shard_b}
    publish(base, token, "acme/batched", files)
    np_files = {"one.safetensors": st_bytes({k: v for k, v in
                                             (("x.f32", from_np(rng.standard_normal((300, 7)).astype(np.float32))),
                                              ("x.f16", from_np(rng.standard_normal(77).astype(np.float16))),
                                              ("x.i8", from_np(I8)))}),
                "two.safetensors": st_bytes({"y.f64": from_np(F64), "y.bool": from_np(BOOL)})}
    publish(base, token, "acme/batched-np", np_files)
    ref, np_ref = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for table, out in ((files, ref), (np_files, np_ref)):
            for path, data in table.items():
                with open(os.path.join(tmp, path), "wb") as fh:
                    fh.write(data)
                out.update(file_tensors(os.path.join(tmp, path)))
    url = base + "/acme/batched@latest"
    per_file = 2  # the requests a whole-version load costs without the bundle route

    with safe_open(url, framework="pt") as f:
        n = f._client.requests
        d = f.load_all()
        check("batched torch load_all (F32, BF16, F16, I64, BOOL, U8, scalar, empty): every byte",
              same_bytes(d, ref, "pt") is None, same_bytes(d, ref, "pt"))
        check("batched torch load_all: one request (bundle) or the 404 and one per file",
              f._client.requests - n == (1 if BUNDLE else 1 + per_file), f._client.requests - n)
        check("batched: the bundle route remembered", f.bundle is BUNDLE, f.bundle)
        d["a.f32"].fill_(7.0)  # each tensor owns its memory: writing one leaves the others
        rest = {k: ref[k] for k in ref if k != "a.f32"}
        check("batched: tensors are separate", bool((d["a.f32"] == 7).all()) and same_bytes(
            {k: d[k] for k in rest}, rest, "pt") is None)
    d = tensorgate.torch.load_file(url)
    check("batched torch.load_file (version)", same_bytes(d, ref, "pt") is None, same_bytes(d, ref, "pt"))
    d = tensorgate.torch.load_file(url + "/model-00002-of-00002.safetensors")
    sub = {k: v for k, v in ref.items() if k.startswith("b.")}
    check("batched torch.load_file (one file)", same_bytes(d, sub, "pt") is None, same_bytes(d, sub, "pt"))
    d = tensorgate.numpy.load_file(base + "/acme/batched-np@latest")
    check("batched numpy.load_file (version): every byte", same_bytes(d, np_ref, "np") is None, same_bytes(d, np_ref, "np"))
    d = tensorgate.numpy.load_file(base + "/acme/batched-np@latest/two.safetensors")
    sub = {k: v for k, v in np_ref.items() if k.startswith("y.")}
    check("batched numpy.load_file (one file)", same_bytes(d, sub, "np") is None, same_bytes(d, sub, "np"))
    check_raises("batched numpy.load_file with BF16: TypeError", lambda: tensorgate.numpy.load_file(url), TypeError,
                 contains="BF16")

    # dtype=: the server converts (one bundle request, or tensor by tensor)
    with safe_open(url, framework="np", dtype="F32") as f:
        n = f._client.requests
        d = f.load_all()
        check("batched numpy dtype=F32: one request, or the 404 and one per tensor",
              f._client.requests - n == (1 if BUNDLE else 1 + len(ref)), f._client.requests - n)
        check("batched numpy dtype=F32: BF16 converted", eq(d["a.bf16"], bf.float().numpy()) and
              eq(d["b.i64"], np.frombuffer(ref["b.i64"][2], dtype="<i8").reshape(7, 9)) and d["a.f16"].dtype == np.float32
              and d["a.empty"].shape == (0, 5) and d["a.scalar"].shape == () and float(d["a.scalar"]) == 2.5)

    # prefetch= and get_tensors
    with safe_open(url, framework="pt", prefetch=["a.*", "b.bf16"]) as f:
        n = f._client.requests
        got = {k: f.get_tensor(k) for k in ("a.f32", "a.bf16", "a.f16", "a.scalar", "a.empty", "b.bf16")}
        check("prefetch=: get_tensor of a prefetched tensor sends nothing", f._client.requests == n, f._client.requests - n)
        sub = {k: ref[k] for k in got}
        check("prefetch=: every byte", same_bytes(got, sub, "pt") is None, same_bytes(got, sub, "pt"))
        f.get_tensor("a.f32")
        check("prefetch=: handed out once, then fetched again", f._client.requests == n + 1, f._client.requests - n)
        n = f._client.requests
        d = f.get_tensors(["b.u8", "b.glob*name?", "a.f16", "b.u8"])
        check("get_tensors: order, once each", list(d) == ["b.u8", "b.glob*name?", "a.f16"], list(d))
        sub = {k: ref[k] for k in d}
        check("get_tensors: every byte (a name with glob characters fetched by itself)",
              same_bytes(d, sub, "pt") is None, same_bytes(d, sub, "pt"))
        check("get_tensors: the bundle and the name with glob characters, or one each",
              f._client.requests - n == (2 if BUNDLE else 3), f._client.requests - n)
    with safe_open(url, framework="np", prefetch=True, dtype="F16") as f:
        n = f._client.requests
        check("prefetch=True, dtype=F16", eq(f.get_tensor("a.bf16"), bf.to(torch.float16).numpy())
              and f._client.requests == n)
    check_raises("prefetch= glob matching nothing", lambda: safe_open(url, prefetch=["zz.*"]), reason="tensor_not_found")
    check_raises("prefetch= unknown name", lambda: safe_open(url, prefetch="nope"), reason="tensor_not_found")
    check_raises("prefetch= not a name", lambda: safe_open(url, prefetch=[3]), TypeError)


def main():
    base, token, lbase, ltoken = sys.argv[1:5]
    hostile_checks()
    publish(base, token, "acme/llm", {"model-00001-of-00002.safetensors": SHARD1,
                                          "model-00002-of-00002.safetensors": SHARD2,
                                          "model.safetensors.index.json": INDEX})
    publish(base, token, "acme/mixed", {"mixed.safetensors": MIXED, "extra.safetensors": EXTRA})

    global BUNDLE
    BUNDLE = has_bundle(base)
    print(f"note: the server {'has' if BUNDLE else 'lacks'} the bundle route; "
          f"{'bundle' if BUNDLE else 'fallback'} paths checked")
    batched_checks(base, token)

    # ---- the README's example ("Read tensors remotely from Python"), as written, on the
    # walk-through's model acme/tiny (tests/readme/run.sh runs it in the walk-through too)
    tiny = np.arange(12, dtype=np.float32).reshape(4, 3)
    publish(base, token, "acme/tiny", {"model.safetensors": st_bytes({"weight": from_np(tiny)})})
    readme = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "README.md")).read()
    sec = readme.split("## Read tensors remotely from Python", 1)[1].split("\n## ", 1)[0]
    block = sec.split("```python\n", 1)[1].split("```", 1)[0]
    env = {}
    exec(compile(block.replace("http://127.0.0.1:8080", base), "README.md", "exec"), env)  # noqa: S102
    check("README example: keys", sorted(env["names"]) == ["weight"], env["names"])
    check("README example: metadata", env["meta"] is None, env["meta"])
    check("README example: get_tensor", eq(env["w"], tiny))
    check("README example: slice", eq(env["part"], tiny[1:3, ::2]))

    # ---- the sharded model as one key space, NumPy
    with safe_open(base + "/acme/llm@latest", framework="np") as f:
        check("sharded keys", sorted(f.keys()) == sorted(SHARDED), f.keys())
        check("sharded metadata merged", f.metadata() == {"format": "pt", "note": "second"}, f.metadata())
        for k, a in SHARDED.items():
            check(f"np get_tensor {k}", eq(f.get_tensor(k), a))
        s = f.get_slice("lm_head.weight")
        before = f._client.bytes_in
        part = s[:, 1024:2048]
        check("a slice is fetched as a slice", f._client.bytes_in - before == 12 * 1024 * 4 and eq(part, LM_HEAD[:, 1024:2048]),
              f"{f._client.bytes_in - before} bytes")
        check("get_shape", s.get_shape() == [12, 3072], s.get_shape())
        check("get_dtype", s.get_dtype() == "F32", s.get_dtype())
        for key in KEYS_2D:
            got = s[key]
            check(f"np slice lm_head{key}", eq(got, LM_HEAD[key]), f"{got.shape} vs {LM_HEAD[key].shape}")
        for key in KEYS_3D:
            got = f.get_slice("model.layers.0.w")[key]
            check(f"np slice layer{key}", eq(got, LAYER[key]), f"{got.shape} vs {LAYER[key].shape}")
        got = f.get_slice("model.norm.weight")[::-3]
        check("np slice F16 [::-3]", eq(got, NORM[::-3]))
        got = f.get_slice("model.embed.weight")[np.int64(4), np.int32(-2)]
        check("np slice numpy-int index (0-d)", eq(got, EMBED[4, -2]) and got.shape == (), repr(got))
        check_raises("slice step 0", lambda: s[::0], ValueError)
        check_raises("slice too many indices", lambda: s[1, 2, 3], IndexError)
        check_raises("slice float index", lambda: s[1.5], TypeError)
        n = f._client.requests
        check_raises("slice int out of range: a local IndexError", lambda: s[12], IndexError, contains="out of bounds")
        check_raises("slice negative int out of range: IndexError", lambda: s[5, -3073], IndexError)
        check("an index out of range costs no request", f._client.requests == n, f._client.requests - n)
        check_raises("unknown tensor", lambda: f.get_tensor("nope"), reason="tensor_not_found")
        # dtype conversion on the server vs numpy astype
        cl = f._client
        check("keep-alive: one connection for every request", cl.connects == 1, f"{cl.connects} connects, {cl.requests} requests")
        check("header route read once per file", len(f._headers) == 2)

    with safe_open(base + "/acme/llm@1", framework="numpy", dtype="F16") as f:
        check("np dtype=F16 of F32", eq(f.get_tensor("model.embed.weight"), EMBED.astype(np.float16)))
        check("np dtype=F16 slice", eq(f.get_slice("lm_head.weight")[::-2, 7:3000:13], LM_HEAD[::-2, 7:3000:13].astype(np.float16)))
        check("np dtype=F16 of F16 (own dtype)", eq(f.get_tensor("model.norm.weight"), NORM))
        check("dtype= leaves an I64 tensor as it is", eq(f.get_tensor("model.layers.0.w"), LAYER))
    with safe_open(base + "/acme/llm", dtype=np.float64) as f:
        check("np dtype=np.float64 (rev defaults to latest)", eq(f.get_tensor("model.norm.weight"), NORM.astype(np.float64)))

    # ---- torch on the sharded model
    with safe_open(base + "/acme/llm@latest", framework="pt") as f:
        t = f.get_tensor("lm_head.weight")
        check("pt get_tensor", isinstance(t, torch.Tensor) and torch.equal(t, torch.from_numpy(LM_HEAD)))
        for key in KEYS_2D:
            t = f.get_slice("lm_head.weight")[key]
            check(f"pt slice lm_head{key}", isinstance(t, torch.Tensor) and np.array_equal(t.numpy(), LM_HEAD[key])
                  and tuple(t.shape) == LM_HEAD[key].shape)
        t = f.get_slice("model.layers.0.w")[1:, 3]
        check("pt I64 slice", t.dtype == torch.int64 and np.array_equal(t.numpy(), LAYER[1:, 3]))
    with safe_open(base + "/acme/llm@latest", framework="torch", dtype="BF16") as f:
        t = f.get_tensor("model.embed.weight")
        check("pt dtype=BF16 vs torch .to", t.dtype == torch.bfloat16 and torch.equal(t, torch.from_numpy(EMBED).to(torch.bfloat16)))
        t = f.get_slice("model.norm.weight")[3:20:4]
        check("pt dtype=BF16 of F16 slice", torch.equal(t, torch.from_numpy(NORM[3:20:4]).to(torch.bfloat16)))
    with safe_open(base + "/acme/llm@latest", framework="pt", dtype=torch.float16) as f:
        t = f.get_tensor("lm_head.weight")
        check("pt dtype=torch.float16 vs torch .to", torch.equal(t, torch.from_numpy(LM_HEAD).to(torch.float16)))

    # ---- the mixed-dtype model, one file
    url = base + "/acme/mixed@latest/mixed.safetensors"
    with safe_open(url, framework="np") as f:
        check("file keys (one file only), sorted", f.keys() == sorted(MIXED_T), f.keys())
        check("offset_keys in file order", f.offset_keys() == list(MIXED_T), f.offset_keys())
        check("file metadata", f.metadata() == {"format": "pt", "kind": "mixed"}, f.metadata())
        for k, a in MIXED_NP.items():
            check(f"np mixed get_tensor {k}", eq(f.get_tensor(k), a), repr(f.get_tensor(k))[:200])
        check("np I8 slice", eq(f.get_slice("i8")[-2::-3], I8[-2::-3]))
        check("np BOOL slice", eq(f.get_slice("bool")[::-1, 1], BOOL[::-1, 1]))
        check("np F64 slice", eq(f.get_slice("f64")[1], F64[1]))
        check("np empty slice", eq(f.get_slice("empty")[:, 1:], EMPTY[:, 1:]))
        check_raises("np BF16: clear error suggesting dtype=F32", lambda: f.get_tensor("bf16"), TypeError,
                     contains='dtype="F32"')
        check_raises("np F8: clear error", lambda: f.get_tensor("f8"), TypeError, contains="F8_E4M3")
        # the path taken when the server would pick a namesake in another file:
        # the file's bytes by Range, indexed here
        got = f._fetch_from_file(f._entry("f32"), "::-1,1:3,-2")
        check("file form by Range, indexed locally", eq(got, F32[::-1, 1:3, -2]))
        check("file form by Range, whole", eq(f._fetch_from_file(f._entry("i64"), ""), I64))
        check_raises("file form: a tensor of another file is unknown", lambda: f.get_tensor("x"), reason="tensor_not_found")
    with safe_open(url, framework="np", dtype="F32") as f:
        check("np BF16 with dtype=F32", eq(f.get_tensor("bf16"), BF16.float().numpy()))
        check("np BF16 slice with dtype=F32", eq(f.get_slice("bf16")[::-2, 1::3], BF16.float().numpy()[::-2, 1::3]))
        check("np F16 to F32", eq(f.get_tensor("f16"), F16.astype(np.float32)))
        check("np F64 to F32", eq(f.get_tensor("f64"), F64.astype(np.float32)))
        check("np F8_E4M3 to F32", eq(f.get_tensor("f8"), f8_e4m3_to_f32(F8.reshape(-1)).reshape(F8.shape)))
        check("np scalar", eq(f.get_tensor("scalar"), SCALAR))
    with safe_open(url, framework="pt") as f:
        t = f.get_tensor("bf16")
        check("pt BF16 directly", t.dtype == torch.bfloat16 and torch.equal(t, BF16))
        t = f.get_slice("bf16")[::-1, 2:9:3]
        ref = BF16.view(torch.int16).numpy()[::-1, 2:9:3]
        check("pt BF16 negative-step slice", t.dtype == torch.bfloat16 and np.array_equal(t.view(torch.int16).numpy(), ref))
        check("pt bool", torch.equal(f.get_tensor("bool"), torch.from_numpy(BOOL)))
        check("pt empty", tuple(f.get_tensor("empty").shape) == (0, 3))
        check("pt scalar", f.get_tensor("scalar").shape == torch.Size([]) and float(f.get_tensor("scalar")) == 3.5)
        check_raises("pt F8 on torch without float8: clear error", lambda: f.get_tensor("f8"), TypeError,
                     contains='dtype="F32"')
    with safe_open(base + "/acme/mixed@latest", framework="pt", dtype="F32") as f:
        check("version form keys (both files)", sorted(f.keys()) == sorted(list(MIXED_T) + ["x"]))
        check("pt BF16 to F32", torch.equal(f.get_tensor("bf16"), BF16.float()))

    # ---- variants without an index: two files hold a tensor of the same name;
    # the one-file form reads the file it names, whichever the server would pick
    W32 = np.arange(12, dtype=np.float32).reshape(4, 3)
    W16 = (np.arange(12, dtype=np.float16) * -2).reshape(4, 3)
    try:
        publish(base, token, "acme/variants", {"model.safetensors": st_bytes({"w": from_np(W32)}),
                                               "model.fp16.safetensors": st_bytes({"w": from_np(W16)})})
        variants = True
    except RuntimeError as e:  # a server that refuses namesakes across files (index_mismatch)
        print(f"skip: variants not publishable here ({str(e)[-120:]})")
        variants = False
    for path, ref in (("model.safetensors", W32), ("model.fp16.safetensors", W16)) if variants else ():
        with safe_open(f"{base}/acme/variants@latest/{path}") as f:
            check(f"variants {path} get_tensor", eq(f.get_tensor("w"), ref))
            check(f"variants {path} slice", eq(f.get_slice("w")[::-2, 1:], ref[::-2, 1:]))
    for path, ref in (("model.safetensors", W32), ("model.fp16.safetensors", W16)) if variants else ():
        with safe_open(f"{base}/acme/variants@latest/{path}", dtype="F16") as f:
            check(f"variants {path} dtype=F16 slice", eq(f.get_slice("w")[:, ::-2], ref[:, ::-2].astype(np.float16)))
        with safe_open(f"{base}/acme/variants@latest/{path}", dtype="F64") as f:
            check(f"variants {path} dtype=F64", eq(f.get_tensor("w"), ref.astype(np.float64)))
        with safe_open(f"{base}/acme/variants@latest/{path}", framework="pt", dtype="BF16") as f:
            t = f.get_slice("w")[::-1, 1]
            check(f"variants {path} pt dtype=BF16 negative step",
                  torch.equal(t, torch.from_numpy(np.ascontiguousarray(ref[::-1, 1])).to(torch.bfloat16)))
        with safe_open(f"{base}/acme/variants@latest/{path}", framework="pt") as f:
            t = f.get_slice("w")[::-1, 1:]
            check(f"variants {path} pt negative step", np.array_equal(t.numpy(), ref[::-1, 1:]))
    if variants:
        with safe_open(f"{base}/acme/variants@latest") as f:
            check("variants version form: one key", f.keys() == ["w"], f.keys())
            s = f.get_slice("w")
            check("variants version form: the served file's dtype (first in path order)", s.get_dtype() == "F16", s.get_dtype())
            check("variants version form: values", eq(s[1:], W16[1:]))
            n = f._client.requests
            d = f.load_all()
            check("variants version form: load_all takes the served file's tensor", list(d) == ["w"] and eq(d["w"], W16))
            check("variants version form: load_all, one bundle per file or the 404 and one per file",
                  f._client.requests - n == (1 if BUNDLE else 2), f._client.requests - n)
        with safe_open(f"{base}/acme/variants@latest", prefetch=["w"]) as f:
            check("variants version form: prefetch= takes the served file's tensor", eq(f.get_tensor("w"), W16))
        for path, ref in (("model.safetensors", W32), ("model.fp16.safetensors", W16)):
            d = tensorgate.load_file(f"{base}/acme/variants@latest/{path}")
            check(f"variants load_file {path}", list(d) == ["w"] and eq(d["w"], ref))
        # shards + index beside consolidated.safetensors: the index decides
        cons = st_bytes({"lm_head.weight": from_np(LM_HEAD.astype(np.float16)), "model.embed.weight": from_np(EMBED)})
        publish(base, token, "acme/cons", {"consolidated.safetensors": cons, "model-00001-of-00002.safetensors": SHARD1,
                                           "model-00002-of-00002.safetensors": SHARD2,
                                           "model.safetensors.index.json": INDEX})
        with safe_open(f"{base}/acme/cons@latest") as f:
            s = f.get_slice("lm_head.weight")
            check("index beside consolidated: the index's shard", s.get_dtype() == "F32" and s.get_shape() == [12, 3072],
                  s.get_dtype())
            check("index beside consolidated: values", eq(s[:, ::-100], LM_HEAD[:, ::-100]))
        with safe_open(f"{base}/acme/cons@latest/consolidated.safetensors") as f:
            check("consolidated file form", eq(f.get_slice("lm_head.weight")[3:, 5::7], LM_HEAD.astype(np.float16)[3:, 5::7]))

    # ---- sub-byte tensors: a clear TypeError before any transfer (neither NumPy
    # nor torch 1.13 has F4/F6); dtype= asks the server, which refuses them
    publish(base, token, "acme/subbyte", {"model.safetensors": st_bytes(
        {"f4": raw("F4", [4, 6], bytes(range(12))), "f6": raw("F6_E3M2", [2, 8], bytes(range(12))),
         "u8": from_np(U8)})})
    with safe_open(base + "/acme/subbyte@latest") as f:
        check("sub-byte keys and shapes", f.offset_keys() == ["f4", "f6", "u8"] and f.get_slice("f6").get_shape() == [2, 8]
              and f.get_slice("f4").get_dtype() == "F4")
        n = f._client.requests
        check_raises("np F4: TypeError", lambda: f.get_tensor("f4"), TypeError, contains="F4")
        check_raises("np F6 slice: TypeError", lambda: f.get_slice("f6")[1], TypeError, contains="F6_E3M2")
        check("sub-byte refused before any request", f._client.requests == n)
        r = f.get_raw("f4")
        check("get_raw F4 whole", r.data == bytes(range(12)) and r.dtype == "F4" and r.shape == [4, 6], r)
        r = f.get_raw("f4", (slice(1, 3),))
        check("get_raw F4 rows", r.data == bytes(range(3, 9)) and r.shape == [2, 6], r)
        r = f.get_raw("f4", (slice(None, None, -1), slice(2, 4)))
        check("get_raw F4 reversed rows, a whole-byte column pair", r.data == bytes([10, 7, 4, 1]) and r.shape == [4, 2], r)
        check_raises("get_raw F4 cutting a byte: the server's refusal", lambda: f.get_raw("f4", (slice(None), slice(1, 3))),
                     status=400)
        r = f.get_raw("f6", 1)
        check("get_raw F6 row", r.data == bytes(range(6, 12)) and r.shape == [8], r)
    with safe_open(url, framework="pt") as f:
        r = f.get_raw("f8", (slice(None, None, -2), slice(3, None, 5)))
        check("get_raw F8 on torch 1.13", r.data == F8[::-2, 3::5].tobytes() and r.dtype == "F8_E4M3", r)
    with safe_open(base + "/acme/subbyte@latest", framework="pt") as f:
        check_raises("pt F4: TypeError", lambda: f.get_tensor("f4"), TypeError, contains="F4")
    with safe_open(base + "/acme/subbyte@latest", dtype="F32") as f:
        check_raises("F4 with dtype=F32: the server's unsupported_conversion", lambda: f.get_tensor("f4"),
                     reason="unsupported_conversion", status=422)
        check("U8 beside it unchanged", eq(f.get_tensor("u8"), U8))
        check_raises("load_all dtype=F32 with an F4 tensor: the server's unsupported_conversion", lambda: f.load_all(),
                     reason="unsupported_conversion", status=422)

    # ---- tensor names that need percent-encoding in the path
    odd = {"blocks/0/attn.weight": from_np(F16), "a b+c%d?e#f&g=h": from_np(I8), "\u00e9t\u00e9.\u4e2d": from_np(F64)}
    publish(base, token, "acme/names", {"model.safetensors": st_bytes(odd)})
    with safe_open(base + "/acme/names@latest") as f:
        check("odd names: keys", sorted(f.keys()) == sorted(odd), f.keys())
        check("name with /", eq(f.get_tensor("blocks/0/attn.weight"), F16))
        check("name with space + % ? # & =", eq(f.get_slice("a b+c%d?e#f&g=h")[::-2], I8[::-2]))
        check("non-ASCII name", eq(f.get_tensor("\u00e9t\u00e9.\u4e2d"), F64))

    # ---- more tensors than one page of the tensor list (10000)
    many = {f"t{i:05d}": raw("U8", [1], bytes([i % 251])) for i in range(10007)}
    publish(base, token, "acme/many", {"model.safetensors": st_bytes(many)})
    with safe_open(base + "/acme/many@latest") as f:
        check("10007 keys over two pages", len(f.keys()) == 10007 and f.keys()[-1] == "t10006", len(f.keys()))
        check("the last page's tensor", eq(f.get_tensor("t10006"), np.array([10006 % 251], dtype=np.uint8)))
        n = f._client.requests
        d = f.load_all()
        # one bundle request; from a server without the route, its 404 and the file
        check("load_all: one request for the whole file", f._client.requests - n == (1 if BUNDLE else 2) and len(d) == 10007
              and all(d[k][0] == i % 251 for i, k in enumerate(sorted(many))), f._client.requests - n)
        n = f._client.requests
        d = f.get_tensors(["t00003", "t10006", "t00003"])
        check("get_tensors: each name once, in order", list(d) == ["t00003", "t10006"] and d["t10006"][0] == 10006 % 251
              and f._client.requests - n == (1 if BUNDLE else 2), f._client.requests - n)

    # ---- load_file / load
    d = tensorgate.load_file(base + "/acme/llm@latest")
    check("load_file np (version)", d.keys() == SHARDED.keys() and all(eq(d[k], SHARDED[k]) for k in SHARDED))
    d = tensorgate.numpy.load_file(base + "/acme/llm@1/model-00002-of-00002.safetensors")
    check("numpy.load_file (one file)", sorted(d) == ["lm_head.weight", "model.layers.0.w"] and eq(d["lm_head.weight"], LM_HEAD))
    check_raises("torch.load_file: F8 on torch 1.13", lambda: tensorgate.torch.load_file(url), TypeError)
    d = tensorgate.torch.load_file(url, dtype="BF16")
    check("torch.load_file dtype=BF16", torch.equal(d["bf16"], BF16) and torch.equal(d["i64"], torch.from_numpy(I64))
          and torch.equal(d["f32"], torch.from_numpy(F32).to(torch.bfloat16)) and d["u8"].dtype == torch.uint8)
    check_raises("numpy.load_file with BF16", lambda: tensorgate.numpy.load_file(url), TypeError)
    d = tensorgate.numpy.load_file(url, dtype="F32")
    check("numpy.load_file dtype=F32", eq(d["bf16"], BF16.float().numpy()))
    d = tensorgate.load(SHARD2)
    check("load bytes np", eq(d["lm_head.weight"], LM_HEAD) and eq(d["model.layers.0.w"], LAYER))
    d = tensorgate.numpy.load(SHARD1)
    check("numpy.load bytes", eq(d["model.norm.weight"], NORM))
    check_raises("torch.load bytes with F8 on torch 1.13", lambda: tensorgate.torch.load(MIXED), TypeError)
    d = tensorgate.torch.load(st_bytes({k: v for k, v in MIXED_T.items() if k != "f8"}))
    check("torch.load bytes (BF16)", torch.equal(d["bf16"], BF16) and torch.equal(d["f32"], torch.from_numpy(F32)))
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"tg-py-{os.getpid()}.safetensors")
    with open(path, "wb") as fh:
        fh.write(SHARD1)
    try:
        d = tensorgate.numpy.load_file(path)
        check("numpy.load_file local path", eq(d["model.embed.weight"], EMBED))
    finally:
        os.unlink(path)
    check_raises("load of truncated bytes", lambda: tensorgate.load(SHARD1[:-4]), ValueError)

    # ---- torch is optional: NumPy use works where torch cannot be imported
    import subprocess
    code = ("import sys; sys.modules['torch'] = None\n"
            "import numpy as np, tensorgate, tensorgate.numpy\n"
            f"a = tensorgate.numpy.load_file({base + '/acme/llm@latest'!r})['lm_head.weight']\n"
            f"with tensorgate.safe_open({base + '/acme/llm@latest'!r}) as f: b = f.get_slice('lm_head.weight')[1, ::-9]\n"
            "print(a.shape, b.shape, float(a[1, -1]) == float(b[0]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    check("no torch: NumPy use works", r.returncode == 0 and r.stdout.strip() == "(12, 3072) (342,) True", r.stdout + r.stderr)

    # ---- errors
    check_raises("unknown model -> model_not_found", lambda: safe_open(base + "/acme/nope@latest"),
                 status=404, reason="model_not_found")
    e = check_raises("unknown model, file form", lambda: safe_open(base + "/acme/nope@latest/a.safetensors"), status=404)
    if e is not None:
        check("reason and detail are the server's", e.reason == "model_not_found" and e.detail
              and e.problem.get("reason") == e.reason, f"{e.reason} {e.detail}")
    check_raises("unknown file", lambda: safe_open(base + "/acme/mixed@1/nope.safetensors"), status=404)
    check_raises("unknown version", lambda: safe_open(base + "/acme/mixed@99"), status=404, reason="version_not_found")
    check_raises("bad URL", lambda: safe_open("ftp://x/acme/m"), ValueError)
    check_raises("dtype= not a conversion target", lambda: safe_open(base + "/acme/mixed@1", dtype="I32"), ValueError)
    check_raises("dtype= names are case-sensitive", lambda: safe_open(base + "/acme/mixed@1", dtype="bf16"), ValueError)
    check_raises("bad framework", lambda: safe_open(base + "/acme/mixed@1", framework="jax"), ValueError)
    with safe_open(base + "/acme/mixed@1", token=token) as f:  # a good token works for reads
        check("good token", eq(f.get_tensor("i8"), I8))
    check_raises("connection refused", lambda: safe_open("http://127.0.0.1:1/acme/m@1"), reason="connection_failed")

    # ---- HTTPS (nginx terminating TLS in front of the plain server)
    https, cafile = (sys.argv[5:7] + ["-", ""])[:2]
    if https == "-":
        print("skip: no nginx/openssl for the HTTPS checks")
    else:
        check_raises("https: an untrusted certificate -> tls_failed, not retried",
                     lambda: safe_open(https + "/acme/llm@latest"), reason="tls_failed")
        os.environ["SSL_CERT_FILE"] = cafile
        with safe_open(https + "/acme/llm@latest", framework="pt") as f:
            t = f.get_slice("lm_head.weight")[::-3, 2000:100:-17]
            check("https: slice", np.array_equal(t.numpy(), LM_HEAD[::-3, 2000:100:-17]))
            check("https: get_tensor", eq(f.get_tensor("model.layers.0.w").numpy(), LAYER))
            check("https: keep-alive", f._client.connects == 1, f._client.connects)
        d = tensorgate.load_file(https + "/acme/llm@latest/model-00001-of-00002.safetensors")
        check("https: load_file", eq(d["model.embed.weight"], EMBED))
        del os.environ["SSL_CERT_FILE"]

    # ---- the --auth-read, rate-limited server: tokens, 429 + Retry-After
    publish(lbase, ltoken, "acme/small", {"model.safetensors": SHARD1})
    check_raises("no token with --auth-read -> 401", lambda: safe_open(lbase + "/acme/small@latest"),
                 status=401, reason="unauthorized")
    check_raises("bad token -> 401 unauthorized", lambda: safe_open(lbase + "/acme/small@latest", token="tg_not_a_token"),
                 status=401, reason="unauthorized")
    os.environ["TENSORGATE_TOKEN"] = "tg_bad_from_env"
    check_raises("bad TENSORGATE_TOKEN -> 401", lambda: safe_open(lbase + "/acme/small@latest"), status=401)
    os.environ["TENSORGATE_TOKEN"] = ltoken
    with safe_open(lbase + "/acme/small@latest") as f:
        ok = True
        for i in range(12):
            ok = ok and eq(f.get_slice("model.embed.weight")[i], EMBED[i])
        check("TENSORGATE_TOKEN used by default; rate limited: every value right", ok)
        check("rate limited: 429 retried", f._client.retries > 0, f"{f._client.retries} retries")
        time.sleep(3)  # well past the server's --header-timeout 1: it closes the idle connection
        c0 = f._client.connects
        check("after the server closed an idle connection", eq(f.get_tensor("model.norm.weight"), NORM))
        check("... a new connection was opened", f._client.connects == c0 + 1, f"{c0} -> {f._client.connects}")
    del os.environ["TENSORGATE_TOKEN"]
    # retries are bounded: a client that does not wait gives up with the server's reason
    sleeps = []
    cl = Client(lbase, token=ltoken, sleep=sleeps.append)
    e = None
    for _ in range(300):
        try:
            cl.request("GET", "/v1/models/acme/small/versions/latest/tensors/model.norm.weight")
        except TensorgateError as err:
            e = err
            break
    cl.close()
    check("429 retried at most 4 times, then the server's reason", e is not None and e.status == 429
          and e.reason == "rate_limited" and len(sleeps) >= 4, f"{e} {sleeps}")
    check("each wait is Retry-After's (seconds, bounded)", sleeps and all(0 < x <= 10 and x == int(x) for x in sleeps), sleeps)


if __name__ == "__main__":
    try:
        main()
    except Exception:  # noqa: BLE001
        traceback.print_exc()
        FAILED += 1
    print(f"{PASSED} passed, {FAILED} failed")
    sys.exit(1 if FAILED or not PASSED else 0)
