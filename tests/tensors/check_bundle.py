#!/usr/bin/python3
"""Independent check of tensor bundles (server/routes/bundle.c).

Usage: check_bundle.py CASES.json

CASES.json is a list of cases, each
  {"bundle": PATH, "sources": [PATH, ...], "selectors": [SEL, ...] or null,
   "dtype": DT or null, "model": "org/name", "version": "sha256:..." or "draft:N",
   "metadata_from": PATH or null}
where sources are the original safetensors files in the order the version lists them
(path order). The expected bundle is computed here from the sources alone, with
json + numpy (NumPy basic indexing for slices, fnmatch-like globs written here,
torch .to() for dtype conversions), and the bundle file is parsed here too: its
8-byte length, the header JSON (order of entries, dtype, shape, contiguous
data_offsets, padding with spaces to a multiple of 8, __metadata__) and every byte of
every tensor. Prints "check_bundle: N checks, M failures"; exit 1 on failures, 77
without numpy/torch.
"""
import json
import re
import struct
import sys

try:
    import numpy as np
    import torch
except ImportError:
    print("check_bundle: numpy/torch missing, skipped")
    sys.exit(77)

CHECKS = 0
FAILURES = []

SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "U8": 1,
        "I8": 1, "BOOL": 1}
FLOATS = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
          "BF16": torch.bfloat16}
BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def check(cond, what):
    global CHECKS
    CHECKS += 1
    if not cond:
        FAILURES.append(what)
        if len(FAILURES) <= 30:
            print("FAIL:", what)
    return cond


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    return raw, n, header


def glob_regex(pattern):
    out = []
    for c in pattern:
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        else:
            out.append(re.escape(c))
    return re.compile("".join(out) + r"\Z", re.S)


def parse_selector(sel):
    if sel.endswith("]") and "[" in sel:
        at = sel.rindex("[")
        return sel[:at], sel[at + 1:-1]
    return sel, None


def index_of(spec):
    parts = []
    for p in spec.split(","):
        p = p.strip()
        if ":" in p:
            bits = [int(x) if x.strip() else None for x in p.split(":")]
            parts.append(slice(*bits))
        else:
            parts.append(int(p))
    return tuple(parts)


def tensor_array(raw, n, entry):
    """The stored tensor as raw unsigned integers of its width, in its shape."""
    begin, end = entry["data_offsets"]
    width = SIZE[entry["dtype"]]
    data = raw[8 + n + begin:8 + n + end]
    return np.frombuffer(data, dtype=BITS[width]).reshape(entry["shape"])


def convert(bits, source, target):
    if source == target or source not in FLOATS:
        return bits, source
    t = torch.from_numpy(np.ascontiguousarray(bits).view(
        {8: np.int64, 4: np.int32, 2: np.int16}[SIZE[source]]).copy())
    values = t.view(FLOATS[source]).to(FLOATS[target])
    width = SIZE[target]
    out = values.view({8: torch.int64, 4: torch.int32, 2: torch.int16}[width]).numpy()
    return out.view(BITS[width]), target


def expected(case):
    files = [read_safetensors(p) for p in case["sources"]]
    selectors = case["selectors"] if case["selectors"] else ["*"]
    picked = []  # (name, file index, slice)
    seen = set()
    for sel in selectors:
        pattern, spec = parse_selector(sel)
        is_glob = "*" in pattern or "?" in pattern
        for fi, (raw, n, header) in enumerate(files):
            names = [k for k in header if k != "__metadata__"]
            names.sort(key=lambda k: (header[k]["data_offsets"][0], k))
            for name in names:
                if (is_glob and glob_regex(pattern).match(name)) or (not is_glob and name == pattern):
                    if name not in seen:
                        seen.add(name)
                        picked.append((name, fi, spec))
    out = []
    for name, fi, spec in picked:
        raw, n, header = files[fi]
        entry = header[name]
        bits = tensor_array(raw, n, entry)
        if spec is not None:
            bits = bits[index_of(spec)]
        dtype = entry["dtype"]
        if case["dtype"]:
            bits, dtype = convert(bits, dtype, case["dtype"])
        out.append((name, dtype, list(bits.shape), np.ascontiguousarray(bits).tobytes()))
    return out, files


def check_case(case):
    want, files = expected(case)
    with open(case["bundle"], "rb") as f:
        raw = f.read()
    what = case["bundle"]
    if not check(len(raw) >= 8, what + ": at least 8 bytes"):
        return
    (n,) = struct.unpack("<Q", raw[:8])
    check(n % 8 == 0, what + ": header length a multiple of 8")
    text = raw[8:8 + n].decode("utf-8")
    check(text.rstrip(" ") == text.rstrip(" ").rstrip() and text.rstrip(" ").endswith("}"),
          what + ": header padded with spaces only")
    pairs = json.loads(text, object_pairs_hook=lambda kv: kv)
    keys = [k for k, _ in pairs]
    check(keys[0] == "__metadata__", what + ": __metadata__ first")
    header = dict(pairs)
    meta = dict(header["__metadata__"])
    check(meta.get("tensorgate.model") == case["model"], what + ": tensorgate.model")
    check(meta.get("tensorgate.version") == case["version"], what + ": tensorgate.version")
    if case.get("metadata_from"):
        src = read_safetensors(case["metadata_from"])[2].get("__metadata__", {})
        for k, v in src.items():
            check(meta.get(k) == v, what + ": source metadata " + k)
    else:
        check(set(meta) == {"tensorgate.model", "tensorgate.version"},
              what + ": only tensorgate's metadata with several files: %r" % meta)
    names = keys[1:]
    check(names == [w[0] for w in want], what + ": tensors and order %r vs %r" %
          (names[:8], [w[0] for w in want][:8]))
    offset = 0
    for name, dtype, shape, data in want:
        if name not in header:
            continue
        e = dict(header[name])
        check(e["dtype"] == dtype, "%s: %s dtype %s, expected %s" % (what, name, e["dtype"], dtype))
        check(list(e["shape"]) == shape, "%s: %s shape %s, expected %s" % (what, name, e["shape"], shape))
        check(list(e["data_offsets"]) == [offset, offset + len(data)],
              "%s: %s data_offsets %s, expected %s" % (what, name, e["data_offsets"],
                                                        [offset, offset + len(data)]))
        got = raw[8 + n + offset:8 + n + offset + len(data)]
        check(got == data, "%s: %s bytes differ" % (what, name))
        offset += len(data)
    check(len(raw) == 8 + n + offset, what + ": length %d, expected %d" % (len(raw), 8 + n + offset))
    # the bundle also loads with safetensors' own rules as torch sees them
    if names and all(dict(header[k])["dtype"] in FLOATS or dict(header[k])["dtype"] == "I64"
                     for k in names):
        for name in names[:4]:
            e = dict(header[name])
            b, t = e["data_offsets"]
            arr = np.frombuffer(raw[8 + n + b:8 + n + t], dtype=BITS[SIZE[e["dtype"]]])
            check(arr.size == int(np.prod(e["shape"], dtype=np.int64)), what + ": element count")


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    for case in cases:
        try:
            check_case(case)
        except Exception as e:  # a crash on a bundle is a failure, not a skip
            check(False, "%s: %s: %r" % (case.get("bundle"), type(e).__name__, e))
    print("check_bundle: %d checks, %d failures" % (CHECKS, len(FAILURES)))
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
