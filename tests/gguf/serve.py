#!/usr/bin/python3
"""GGUF serving over real HTTP (docs/MANUAL.md, "GGUF files"), against a real server.

    /usr/bin/python3 tests/gguf/serve.py BINARY

Writes two GGUF files with NumPy data (F32, F16, BF16, I32 tensors and Q8_0 / Q4_K
blocks; the GGUF specification's layout, with generate.py's struct helpers), uploads
them to a fresh server and checks:
  - the header answer against @huggingface/gguf's parse of the same file (serve.mjs):
    metadata types and values (arrays cut to their first elements), tensor names,
    ggml types, shapes (reversed ne[]), absolute offsets; sizes and counts from NumPy;
  - every byte of each tensor (raw, a Range of it), of slices and of dtype
    conversions against NumPy (torch for BF16) computed from the original arrays;
  - a quantized tensor's raw bytes, and its slice / dtype / npy refusal (gguf_quantized);
  - a Range of the whole file; ?file= between two files sharing tensor names;
  - GET .../tensors, the Hub model info's `gguf` field (raw JSON and @huggingface/hub's
    modelInfo), another namespace's token and a missing tensor.
Prints "gguf serve: N passed, N failed"; exit 1 on a failure.
"""
import io
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from generate import ARRAY, BOOL, F32, F64, I8, I64, STRING, U32, U64, kv, s, pad  # noqa: E402

BIN = os.path.abspath(sys.argv[1])
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {str(detail)[:600]}")


# ---- writing GGUF files by the specification ----

GGML_IDS = {"F32": 0, "F16": 1, "Q8_0": 8, "Q4_K": 12, "I32": 26, "BF16": 30}
BLOCK = {"Q8_0": (32, 34), "Q4_K": (256, 144)}


def write_gguf(path, kvs, tensors, align=32):
    """tensors: (name, ne list, type name, raw bytes)."""
    if align != 32:
        kvs = kvs + [kv("general.alignment", U32, align)]
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs)
    off = 0
    offsets = []
    for name, ne, tname, raw in tensors:
        head += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", GGML_IDS[tname], off)
        offsets.append(off)
        off = pad(off + len(raw), align)
    out = bytearray(head)
    out += b"\0" * (pad(len(out), align) - len(out))
    data_start = len(out)
    for i, (_, _, _, raw) in enumerate(tensors):
        out += raw
        if i < len(tensors) - 1:
            out += b"\0" * (pad(len(raw), align) - len(raw))
    open(path, "wb").write(out)
    return data_start, offsets


def bf16_bits(a):
    """float32 array -> bfloat16 bit patterns (torch's round-to-nearest-even)."""
    import torch
    return torch.from_numpy(np.ascontiguousarray(a, np.float32)).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


rng = np.random.default_rng(23)
arrays = {  # name -> (row-major numpy array or raw bytes, ggml type)
    "token_embd.weight": (rng.standard_normal((3, 4, 6)).astype(np.float32), "F32"),
    "blk.0.attn_q.weight": (rng.standard_normal((5, 8)).astype(np.float16), "F16"),
    "blk.0.ffn.weight": (bf16_bits(rng.standard_normal((3, 16)).astype(np.float32)), "BF16"),
    "blk.0.positions": (rng.integers(-2**31, 2**31 - 1, (2, 7), dtype=np.int32), "I32"),
    "blk.0.attn_k.weight": (rng.integers(0, 256, 2 * 2 * 34, dtype=np.uint8), "Q8_0"),
    "blk.0.ffn_down.weight": (rng.integers(0, 256, 144, dtype=np.uint8), "Q4_K"),
}
LOGICAL = {"blk.0.attn_k.weight": [2, 64], "blk.0.ffn_down.weight": [1, 256]}
long_text = "x" * 65535 + "\u00e9" + "tail"  # the 2-byte character straddles the 64 KiB cut
tokens = [f"tok{i}" for i in range(20)] + ["\u00e9" * 300]
KVS = [
    kv("general.architecture", STRING, "llama"),
    kv("general.name", STRING, "tiny \"quoted\" llama"),
    kv("llama.context_length", U32, 4096),
    kv("llama.embedding_length", U32, 6),
    kv("general.file_type", U32, 7),
    kv("general.big", U64, 2**64 - 1),
    kv("general.signed", I64, -(2**40)),
    kv("general.i8", I8, -5),
    kv("general.flag", BOOL, 1),
    kv("general.ratio", F64, 0.1),
    kv("general.readme", STRING, long_text),
    kv("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
    kv("tokenizer.ggml.scores", ARRAY, (F32, [0.5 * i for i in range(12)])),
    kv("tokenizer.ggml.short", ARRAY, (STRING, ["a", "\u00e9" * 200])),
]

work = tempfile.mkdtemp(prefix="tg-gguf-serve.")
tensors = []
for name, (a, tname) in arrays.items():
    ne = LOGICAL.get(name, list(a.shape))[::-1]  # GGUF's ne[]: the fastest dimension first
    tensors.append((name, ne, tname, a.tobytes()))
file_a = os.path.join(work, "tiny-Q8_0.gguf")
data_start, offsets = write_gguf(file_a, KVS, tensors)
# a second quantization of the same model: same names, other bytes, alignment 64
arrays_b = {"token_embd.weight": (rng.standard_normal((3, 4, 6)).astype(np.float32), "F32")}
file_b = os.path.join(work, "tiny-F32.gguf")
write_gguf(file_b, [kv("general.architecture", STRING, "llama")],
           [("token_embd.weight", [6, 4, 3], "F32", arrays_b["token_embd.weight"][0].tobytes())], align=64)
raw_a = open(file_a, "rb").read()

# ---- the server ----
data = os.path.join(work, "data")
log = open(os.path.join(work, "log"), "w+")
server = subprocess.Popen([BIN, "serve", "--listen", "127.0.0.1:0", "--data", data],
                          stdout=subprocess.DEVNULL, stderr=log)
try:
    port = None
    for _ in range(200):
        log.seek(0)
        m = re.search(r"tensorgate: listening on http://[0-9.]+:([0-9]+)", log.read())
        if m:
            port = m.group(1)
            break
        time.sleep(0.05)
    if port is None:
        log.seek(0)
        print("FAIL: the server did not start", log.read()[-2000:])
        sys.exit(1)
    U = f"http://127.0.0.1:{port}"
    urllib.request.install_opener(urllib.request.build_opener(urllib.request.ProxyHandler({})))

    def token(*args):
        out = subprocess.run([BIN, "token", "create", "--data", data] + list(args),
                             capture_output=True, text=True, check=True).stdout
        return out.strip().splitlines()[-1]

    T = token("--scope", "write", "--namespace", "acme")
    OTHER = token("--scope", "write", "--namespace", "umbrella")

    def req(method, path, body=None, tok=T, headers=None):
        h = dict(headers or {})
        if tok:
            h["Authorization"] = "Bearer " + tok
        r = urllib.request.Request(U + path, data=body, method=method, headers=h)
        try:
            with urllib.request.urlopen(r) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def get_json(path, **kw):
        st, h, b = req("GET", path, **kw)
        try:
            return st, json.loads(b)
        except ValueError:
            return st, None

    req("POST", "/v1/models", json.dumps({"name": "acme/tiny"}).encode())
    req("POST", "/v1/models/acme/tiny/versions")
    V = "/v1/models/acme/tiny/versions/1"
    for f in (file_a, file_b):
        st, _, b = req("PUT", f"{V}/files/{os.path.basename(f)}", open(f, "rb").read())
        check(f"upload {os.path.basename(f)}", st == 201, (st, b))
    st, _, b = req("POST", f"{V}/publish")
    check("publish", st == 200, (st, b))

    # ---- the header answer, against @huggingface/gguf ----
    st, h = get_json(f"{V}/files/tiny-Q8_0.gguf/header")
    check("header 200", st == 200 and h is not None, h)
    p = subprocess.run(["node", os.path.join(HERE, "serve.mjs"), "parse", file_a], capture_output=True,
                       text=True, cwd=HERE)
    check("@huggingface/gguf reads the file", p.returncode == 0, p.stderr)
    ref = json.loads(p.stdout)
    check("format, version, alignment, architecture",
          (h["format"], h["version"], h["alignment"], h["architecture"]) == ("gguf", ref["version"], 32, "llama"), h)
    check("data_start is the reader's tensor data offset",
          h["data_start"] == int(ref["tensorDataOffset"]) == data_start, (h["data_start"], ref["tensorDataOffset"]))
    check("tensor and metadata counts", h["tensor_count"] == len(tensors) and h["metadata_count"] == len(KVS),
          (h["tensor_count"], h["metadata_count"]))
    TYPE_NAMES = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string",
                  "array", "uint64", "int64", "float64"]
    check("metadata keys, in file order", list(h["metadata"]) == list(ref["metadata"]),
          (list(h["metadata"]), list(ref["metadata"])))
    for key, r in ref["metadata"].items():
        m = h["metadata"].get(key, {})
        if TYPE_NAMES[r["type"]] == "array":
            want = r["value"]
            shown = want[:8]
            if TYPE_NAMES[r["subType"]] == "string":
                shown = [x.encode()[:256].decode("utf-8", "ignore") for x in shown]
            ok = (m.get("type") == "array" and m.get("element_type") == TYPE_NAMES[r["subType"]] and
                  m.get("length") == len(want) and m.get("value") == shown and
                  m.get("truncated", False) == (len(want) > 8 or shown != want[:8]))
        elif TYPE_NAMES[r["type"]] == "string":
            b = r["value"].encode()
            cut = b[:65536].decode("utf-8", "ignore")
            ok = m.get("type") == "string" and m.get("value") == cut and (
                (m.get("truncated"), m.get("length")) == ((True, len(b)) if len(b) > 65536 else (None, None)))
        elif TYPE_NAMES[r["type"]] == "bool":
            ok = m.get("type") == "bool" and m.get("value") is bool(r["value"])
        else:
            v = m.get("value")
            want = r["value"]
            if isinstance(want, str):  # a bigint from the reader
                want = int(want)
            if isinstance(v, str):  # above INT64_MAX: a decimal string
                v = int(v)
            ok = m.get("type") == TYPE_NAMES[r["type"]] and v == want
        check(f"metadata {key} as @huggingface/gguf reads it", ok, (m, r))
    check("the long string is cut at a character boundary",
          h["metadata"]["general.readme"]["value"] == "x" * 65535, len(h["metadata"]["general.readme"]["value"]))
    check("tensor names in file order", [t["name"] for t in h["tensors"]] == [t["name"] for t in ref["tensors"]])
    for t, r, (name, ne, tname, raw), off in zip(h["tensors"], ref["tensors"], tensors, offsets):
        shape = LOGICAL.get(name) or list(arrays[name][0].shape)
        check(f"tensor {name}: type, row-major shape (reader's ne reversed), offset, size",
              t["dtype"] == r["dtype"] == tname and t["shape"] == [int(x) for x in r["shape"]][::-1] == shape and
              t["offset"] == int(ref["tensorDataOffset"]) + int(r["offset"]) == data_start + off and
              t["size"] == len(raw) and t["data_offsets"] == [t["offset"], t["offset"] + len(raw)], (t, r))
    check("parameter count as the reader's", h["parameters_total"] == ref["parameterCount"] ==
          sum(int(np.prod(LOGICAL.get(n) or arrays[n][0].shape)) for n in arrays),
          (h["parameters_total"], ref["parameterCount"]))
    check("parameters per type", h["parameters"].get("Q4_K") == 256 and h["parameters"].get("F32") == 72,
          h["parameters"])
    st2, h2 = get_json(f"{V}/files/tiny-Q8_0.gguf/header")
    check("a second header GET answers the same (cached)", st2 == 200 and h2 == h)
    st, _, b = req("PUT", f"{V}/files/x.gguf", open(file_b, "rb").read(), tok=OTHER)
    check("another namespace's token cannot add a file", st in (403, 404), (st, b))

    # ---- the tensor list ----
    st, lst = get_json(f"/v1/models/acme/tiny/versions/1/tensors")
    names = [(t["file"], t["name"]) for t in lst["tensors"]]
    check("tensor list: both files' tensors, path order", st == 200 and lst["total"] == 7 and
          names == [("tiny-F32.gguf", "token_embd.weight")] + [("tiny-Q8_0.gguf", n) for n in arrays], lst)
    check("tensor list entries say gguf and their ggml type",
          all(t["format"] == "gguf" for t in lst["tensors"]) and lst["tensors"][5]["dtype"] == "Q8_0", lst)
    st, pg = get_json("/v1/models/acme/tiny/versions/1/tensors?limit=3")
    st2, pg2 = get_json("/v1/models/acme/tiny/versions/1/tensors?limit=10&cursor=" +
                        urllib.request.quote(pg.get("next_cursor") or ""))
    check("tensor list pages through GGUF files",
          [t["name"] for t in pg["tensors"] + pg2["tensors"]] == [n for _, n in names], (pg, pg2))

    # ---- tensor bytes ----
    TV = "/v1/models/acme/tiny/versions/1/tensors/"
    F = "?file=tiny-Q8_0.gguf"

    def tensor(name, query="", **kw):
        sep = "&" if query else ""
        return req("GET", TV + name + F + sep + query, **kw)

    for (name, ne, tname, raw), off in zip(tensors, offsets):
        st, hd, body = tensor(name)
        check(f"{name}: raw bytes are the file's and NumPy's", st == 200 and body == raw ==
              raw_a[data_start + off:data_start + off + len(raw)], (st, len(body)))
        shape = LOGICAL.get(name) or list(arrays[name][0].shape)
        check(f"{name}: headers", hd.get("X-Tensor-Dtype") == tname and hd.get("X-Tensor-Source-Dtype") == tname and
              json.loads(hd.get("X-Tensor-Shape", "null")) == shape and hd.get("X-Tensor-Format") == "gguf", hd)
        st, hd, body = tensor(name, headers={"Range": "bytes=3-17"})
        check(f"{name}: a Range of the tensor", st == 206 and body == raw[3:18] and
              hd.get("Content-Range") == f"bytes 3-17/{len(raw)}", (st, hd.get("Content-Range")))
    # without ?file=: the first file in path order (tiny-F32.gguf) holds token_embd.weight
    st, _, body = req("GET", TV + "token_embd.weight")
    check("without ?file= the first file in path order answers", body == arrays_b["token_embd.weight"][0].tobytes())
    st, _, body = req("GET", TV + "blk.0.positions")
    check("a name only one file holds is found without ?file=", st == 200 and body == arrays["blk.0.positions"][0].tobytes())

    f32 = arrays["token_embd.weight"][0]
    f16 = arrays["blk.0.attn_q.weight"][0]
    bf16 = arrays["blk.0.ffn.weight"][0]
    i32 = arrays["blk.0.positions"][0]
    bf16_as_f32 = (bf16.astype(np.uint32) << 16).view(np.float32)
    cases = [
        ("token_embd.weight", "slice=1:3,::2,-1", f32[1:3, ::2, -1].tobytes()),
        ("token_embd.weight", "slice=2", f32[2].tobytes()),
        ("blk.0.attn_q.weight", "slice=::2,1:7:3", f16[::2, 1:7:3].tobytes()),
        ("blk.0.ffn.weight", "slice=1:,4:12", bf16[1:, 4:12].tobytes()),
        ("blk.0.positions", "slice=-1,::-2", i32[-1, ::-2].tobytes()),
        ("blk.0.attn_q.weight", "dtype=F32", f16.astype(np.float32).tobytes()),
        ("blk.0.ffn.weight", "dtype=F32", bf16_as_f32.tobytes()),
        ("token_embd.weight", "dtype=F16", f32.astype(np.float16).tobytes()),
        ("token_embd.weight", "dtype=BF16", bf16_bits(f32).tobytes()),
        ("token_embd.weight", "dtype=F64&slice=0,1", f32[0, 1].astype(np.float64).tobytes()),
        ("blk.0.ffn.weight", "dtype=F16&slice=2", bf16_as_f32[2].astype(np.float16).tobytes()),
    ]
    for name, q, want in cases:
        st, hd, body = tensor(name, q)
        check(f"{name}?{q} as NumPy computes it", st == 200 and body == want, (st, body[:80]))
    st, hd, body = tensor("blk.0.attn_q.weight", "format=npy&slice=1:3")
    got = np.load(io.BytesIO(body)) if st == 200 else None
    check("format=npy of an F16 slice loads in NumPy", got is not None and got.dtype == np.float16 and
          np.array_equal(got, f16[1:3]), (st, body[:200]))
    st, hd, body = tensor("blk.0.positions", "dtype=F32")
    check("an I32 conversion is the engine's refusal", st == 422 and json.loads(body)["reason"] == "unsupported_conversion",
          (st, body))

    # ---- quantized: raw bytes only ----
    for q in ("slice=0", "dtype=F32", "format=npy", "slice=0&dtype=F16"):
        st, hd, body = tensor("blk.0.attn_k.weight", q)
        reason = json.loads(body).get("reason") if body.startswith(b"{") else None
        check(f"Q8_0 ?{q} is refused gguf_quantized", st == 422 and reason == "gguf_quantized", (st, body))
    st, hd, body = tensor("blk.0.ffn_down.weight", "format=raw")
    check("Q4_K ?format=raw is its bytes", st == 200 and body == arrays["blk.0.ffn_down.weight"][0].tobytes(), st)
    st, _, body = tensor("absent.weight")
    check("a missing tensor is 404 tensor_not_found", st == 404 and json.loads(body)["reason"] == "tensor_not_found", body)
    st, _, body = req("GET", TV + "token_embd.weight?file=nope.gguf")
    check("?file= of a missing file is 404 file_not_found", st == 404 and json.loads(body)["reason"] == "file_not_found", body)
    st, _, body = req("GET", TV + "token_embd.weight?file=../../etc/passwd")
    check("?file= of a path outside the version is 404", st == 404, (st, body))
    st, _, body = req("GET", TV + "a" * 300 + F)
    check("a name longer than any GGUF tensor's is 404", st == 404, (st, body))

    # ---- the whole file, by range ----
    st, hd, body = req("GET", f"{V}/files/tiny-Q8_0.gguf", headers={"Range": "bytes=100-4099"})
    check("a Range of the whole file", st == 206 and body == raw_a[100:4100], (st, len(body)))
    st, hd, body = req("GET", f"{V}/files/tiny-Q8_0.gguf")
    check("the whole file", st == 200 and body == raw_a, st)

    # ---- the Hub's model info ----
    st, info = get_json("/api/models/acme/tiny", tok=None)
    check("Hub model info: gguf {total, architecture, context_length} of the first GGUF file",
          st == 200 and info.get("gguf") == {"total": 72, "architecture": "llama"}, info.get("gguf"))
    st, info = get_json("/api/models/acme/tiny/revision/1?expand=gguf", tok=None)
    check("Hub model info by revision", st == 200 and info.get("gguf", {}).get("total") == 72, info.get("gguf"))
    # a version whose first GGUF file has a context length
    req("POST", "/v1/models/acme/tiny/versions")
    st, _, _ = req("PUT", "/v1/models/acme/tiny/versions/2/files/tiny-Q8_0.gguf", raw_a)
    req("POST", "/v1/models/acme/tiny/versions/2/publish")
    st, info = get_json("/api/models/acme/tiny", tok=None)
    want_hub = {"total": h["parameters_total"], "architecture": "llama", "context_length": 4096}
    check("Hub model info of the newest version", info.get("gguf") == want_hub, info.get("gguf"))
    if os.path.isdir(os.path.join(HERE, "..", "hf", "node_modules", "@huggingface", "hub")):
        p = subprocess.run(["node", os.path.join(HERE, "serve.mjs"), "hub", U, "acme/tiny"], capture_output=True,
                           text=True, cwd=HERE)
        got = json.loads(p.stdout) if p.returncode == 0 else {"error": p.stderr}
        check("@huggingface/hub modelInfo passes the gguf field through", got.get("gguf") == want_hub, got)
finally:
    server.terminate()
    server.wait()
    log.seek(0)
    text = log.read()
    # an ASan build reports memory errors and leaks in its log
    check("the server stopped cleanly (no sanitizer report)", "Sanitizer" not in text,
          text[text.find("Sanitizer") - 200:][:3000])
    log.close()
    shutil.rmtree(work, ignore_errors=True)

print(f"gguf serve: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
