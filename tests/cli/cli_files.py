"""Fixtures and numeric checks for tests/cli/run.sh (run with /usr/bin/python3:
numpy and torch). safetensors bytes are written by hand: 8-byte LE header length,
the JSON header, the data section.

  cli_files.py make DIR                         write every fixture into DIR
  cli_files.py json FILE EXPR                   each line of FILE is JSON; EXPR (Python,
                                                with d = the last line, lines = all) must hold
  cli_files.py inspect DIR JSONFILE NAME        inspect --json output agrees with numpy
  cli_files.py convert LISTFILE                 each line "IN OUT DTYPE [GLOBS]": OUT is IN
                                                converted as torch .to() does; prints
                                                PASS/FAIL per line
numpy and torch are imported only by the commands that need them (importing
torch takes seconds).
"""
import fnmatch
import io
import json
import pickle
import struct
import sys

np = None
torch = None
DTYPES = {}


def load_numeric():
    """Imports numpy and torch; fills DTYPES: name -> (numpy dtype, torch dtype, bytes)."""
    global np, torch
    import numpy
    import torch as torch_module
    np, torch = numpy, torch_module
    DTYPES.update({
        "F64": (np.float64, torch.float64, 8),
        "F32": (np.float32, torch.float32, 4),
        "F16": (np.float16, torch.float16, 2),
        "BF16": (None, torch.bfloat16, 2),
        "F8_E4M3": (None, None, 1),
        "F8_E5M2": (None, None, 1),
        "I64": (np.int64, torch.int64, 8),
        "I32": (np.int32, torch.int32, 4),
        "U8": (np.uint8, torch.uint8, 1),
    })

FLOATS = ("F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2")


def tensor_bytes(t):
    """Little-endian bytes of a torch tensor (bf16 through an int16 view)."""
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_st(path, tensors, metadata=None, header_pad=0):
    """tensors: list of (name, dtype name, shape, raw bytes), written in this order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode() + b" " * header_pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, _, _, raw in tensors:
            f.write(raw)


def read_st(path):
    """(header dict, data_start, file bytes)."""
    blob = open(path, "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + n]), 8 + n, blob


def decode(dtype, raw):
    """Values of raw as float64 numpy (floats) or int64."""
    if dtype == "BF16":
        return torch.frombuffer(bytearray(raw), dtype=torch.int16).view(torch.bfloat16).double().numpy()
    if dtype == "F8_E5M2":
        # E5M2 is the high byte of an IEEE half
        halves = np.frombuffer(raw, dtype=np.uint8).astype(np.uint16) << 8
        return halves.view(np.float16).astype(np.float64)
    if dtype == "F8_E4M3":
        out = []
        for b in raw:
            sign = -1.0 if b & 0x80 else 1.0
            e, m = (b >> 3) & 15, b & 7
            if e == 15 and m == 7:
                out.append(float("nan"))
            elif e == 0:
                out.append(sign * m / 8.0 * 2.0 ** -6)
            else:
                out.append(sign * (1 + m / 8.0) * 2.0 ** (e - 7))
        return np.array(out, dtype=np.float64)
    return np.frombuffer(raw, dtype=DTYPES[dtype][0]).astype(np.float64)


def make(d):
    rng = np.random.default_rng(7)
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    ids = np.arange(4, dtype=np.int64)
    bias = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    valid = [("w", "F32", (2, 3), w.tobytes()), ("ids", "I64", (4,), ids.tobytes()),
             ("bias", "F32", (3,), bias.tobytes())]
    write_st(f"{d}/valid.safetensors", valid, {"format": "pt", "note": "caf\u00e9"})
    blob = open(f"{d}/valid.safetensors", "rb").read()
    open(f"{d}/truncated.safetensors", "wb").write(blob[:-4])
    # a polyglot tail: an empty ZIP end-of-central-directory record after the data
    open(f"{d}/trailing.safetensors", "wb").write(blob + b"PK\x05\x06" + b"\0" * 18)
    open(f"{d}/header_ws.safetensors", "wb").write(struct.pack("<Q", 4) + b"  {}")
    write_st(f"{d}/empty.safetensors", [])

    # N = 67,324,752 spells PK\3\4\0\0\0\0: a valid file that starts like a ZIP
    head = json.dumps({"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}},
                      separators=(",", ":")).encode()
    n = 67324752
    with open(f"{d}/pk_magic.safetensors", "wb") as f:
        f.write(struct.pack("<Q", n))
        f.write(head + b" " * (n - len(head)))
        f.write(np.array([1.0, 2.0], dtype=np.float32).tobytes())

    # other formats, classified by content whatever the name
    open(f"{d}/model.bin", "wb").write(pickle.dumps({"w": [1, 2, 3]}, protocol=2))
    # protocol 0 that imports and calls (built as bytes, never loaded): ASCII, a pickle
    open(f"{d}/proto0.txt", "wb").write(b"cos\nsystem\n(S'echo hi'\ntR.")
    # what a pickle would do (issue 23): posix.system by STACK_GLOBAL + REDUCE, protocol 4
    open(f"{d}/evil.bin", "wb").write(b"\x80\x04\x8c\x05posix\x94\x8c\x06system\x94\x93\x94"
                                      b"\x8c\x07echo hi\x94\x85\x94R\x94.")
    # data-only protocol-0 pickles are text: a dict, and a model card starting "N.B."
    open(f"{d}/data_only.txt", "wb").write(pickle.dumps({"w": [1, 2]}, protocol=0))
    open(f"{d}/nb.md", "wb").write(b"N.B. this model card starts with a note.\n")
    torch.save({"w": torch.zeros(3)}, f"{d}/torch_zip.safetensors")
    buf = io.BytesIO()
    np.save(buf, np.zeros(3, dtype=np.float32))
    open(f"{d}/array.safetensors", "wb").write(buf.getvalue())

    # sidecars
    open(f"{d}/config.json", "w").write(json.dumps({"hidden_size": 16, "layers": {"n": 2}}, indent=2))
    open(f"{d}/dup.json", "w").write('{"a": 1, "a": 2}')
    open(f"{d}/README.md", "w", encoding="utf-8").write("[![ci](b.svg)](x)\n# Model\n\nweights \u2014 caf\u00e9\n")

    # NaN/Inf in several float dtypes, large enough to cross 1 MiB reads
    tensors = []
    for name, dtype, count in (("big.f32", "F32", 400000), ("half", "F16", 70000),
                               ("brain", "BF16", 90000), ("dbl", "F64", 30000)):
        v = rng.standard_normal(count)
        v[rng.integers(0, count, 37)] = np.nan
        v[rng.integers(0, count, 11)] = np.inf
        v[rng.integers(0, count, 5)] = -np.inf
        t = torch.from_numpy(v).to(DTYPES[dtype][1])
        tensors.append((name, dtype, (count,), tensor_bytes(t)))
    tensors.append(("count", "I32", (5, 2), np.arange(10, dtype=np.int32).tobytes()))
    write_st(f"{d}/nan.safetensors", tensors, {"source": "cli test"})

    # conversion sources
    a = rng.standard_normal(300000).astype(np.float32) * 100
    a[:8] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-40, 3.4e38, 65520.0]
    conv = [("layer.0.weight", "F32", (600, 500), a.tobytes()),
            ("layer.0.bias", "F32", (7,), rng.standard_normal(7).astype(np.float32).tobytes()),
            ("layer.1.weight", "F16", (10, 100), rng.standard_normal(1000).astype(np.float16).tobytes()),
            ("head.weight", "F64", (500,), (rng.standard_normal(500) * 1e5).tobytes()),
            ("head.scale", "BF16", (33,), tensor_bytes(torch.randn(33).to(torch.bfloat16))),
            ("positions", "I64", (10,), np.arange(10, dtype=np.int64).tobytes()),
            ("scalar", "F32", (), np.array(2.5, dtype=np.float32).tobytes()),
            ("nothing", "F32", (0, 4), b"")]
    write_st(f"{d}/conv.safetensors", conv, {"format": "pt"})
    exact = np.array([0, 1, -2, 0.5, 1.5, -0.25, 3, 6, 12, 0.375, 448, -448], dtype=np.float32)
    write_st(f"{d}/f8src.safetensors", [("v", "F32", (12,), exact.tobytes())])


def check_json(path, expr):
    lines = [json.loads(line) for line in open(path) if line.strip()]
    d = lines[-1] if lines else None
    ok = bool(eval(expr, {"d": d, "lines": lines, "len": len, "set": set, "sorted": sorted}))
    if not ok:
        print(f"  expression failed: {expr}\n  on: {lines}")
    return ok


def check_inspect(d, json_path, name):
    out = json.loads(open(json_path).read())
    header, data_start, blob = read_st(f"{d}/{name}")
    ok = True

    def expect(cond, what):
        nonlocal ok
        if not cond:
            print(f"  {what}")
            ok = False

    import hashlib
    expect(out["sha256"] == hashlib.sha256(blob).hexdigest(), "sha256 differs from hashlib")
    expect(out["size"] == len(blob), "size")
    expect(out["data_start"] == data_start, "data_start")
    metadata = header.pop("__metadata__", None)
    expect(out["metadata"] == metadata, f"metadata {out['metadata']} != {metadata}")
    expect(len(out["tensors"]) == len(header), "tensor count")
    params, nan_total, inf_total = {}, 0, 0
    for t in out["tensors"]:
        h = header[t["name"]]
        expect(t["dtype"] == h["dtype"] and t["shape"] == h["shape"], f"{t['name']}: dtype/shape")
        expect(t["begin"] == data_start + h["data_offsets"][0] and t["end"] == data_start + h["data_offsets"][1],
               f"{t['name']}: offsets")
        raw = blob[t["begin"]:t["end"]]
        if h["dtype"] in FLOATS:
            v = decode(h["dtype"], raw)
            nan, inf = int(np.isnan(v).sum()), int(np.isinf(v).sum())
        else:
            nan = inf = 0
        expect(t["nan"] == nan and t["inf"] == inf, f"{t['name']}: nan/inf {t['nan']}/{t['inf']} != {nan}/{inf}")
        nan_total += nan
        inf_total += inf
        params[h["dtype"]] = params.get(h["dtype"], 0) + int(np.prod(h["shape"], dtype=np.int64))
    expect(out["parameters"] == params, f"parameters {out['parameters']} != {params}")
    expect(out["total_parameters"] == sum(params.values()), "total_parameters")
    expect(out["nan"] == nan_total and out["inf"] == inf_total, "nan/inf totals")
    expect(nan_total > 0 or name != "nan.safetensors", "the fixture should hold NaNs")
    return ok


def check_convert(src, dst, dtype, globs):
    hin, sin, bin_ = read_st(src)
    hout, sout, bout = read_st(dst)
    ok = True
    expect_md = hin.pop("__metadata__", None)
    got_md = hout.pop("__metadata__", None)
    if expect_md != got_md:
        print(f"  metadata {got_md} != {expect_md}")
        ok = False
    if sorted(hin) != sorted(hout):
        print("  tensor names differ")
        return False
    patterns = globs.split(",") if globs else ["*"]
    converted = 0
    for name, h in hin.items():
        o = hout[name]
        raw_in = bin_[sin + h["data_offsets"][0]:sin + h["data_offsets"][1]]
        raw_out = bout[sout + o["data_offsets"][0]:sout + o["data_offsets"][1]]
        wanted = h["dtype"] in FLOATS and any(fnmatch.fnmatchcase(name, p) for p in patterns)
        if o["shape"] != h["shape"]:
            print(f"  {name}: shape changed")
            ok = False
        if not wanted:
            if o["dtype"] != h["dtype"] or raw_out != raw_in:
                print(f"  {name}: should be unchanged")
                ok = False
            continue
        if o["dtype"] != dtype:
            print(f"  {name}: dtype {o['dtype']}, expected {dtype}")
            ok = False
            continue
        converted += h["dtype"] != dtype
        if dtype in ("F8_E4M3", "F8_E5M2"):
            # torch 1.13 has no float8: the fixture holds exactly representable values
            if not np.array_equal(decode(dtype, raw_out), decode(h["dtype"], raw_in)):
                print(f"  {name}: F8 values differ")
                ok = False
            continue
        if h["dtype"] in ("F8_E4M3", "F8_E5M2"):
            continue
        src_t = torch.frombuffer(bytearray(raw_in), dtype=torch.int16).view(torch.bfloat16) \
            if h["dtype"] == "BF16" else torch.from_numpy(np.frombuffer(raw_in, dtype=DTYPES[h["dtype"]][0]).copy())
        want = tensor_bytes(src_t.to(DTYPES[dtype][1])) if raw_in else b""
        if raw_out == want:
            continue
        # NaN bits: torch 1.13's vectorised float->bf16 path writes 0xFFFF, its scalar
        # path 0x7FC0, so only NaN-ness is compared; every other value bit for bit
        size = DTYPES[dtype][2]
        got_v, want_v = decode(dtype, raw_out), decode(dtype, want)
        both_nan = np.isnan(got_v) & np.isnan(want_v)
        width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[size]
        got_bits, want_bits = np.frombuffer(raw_out, dtype=width), np.frombuffer(want, dtype=width)
        if len(got_bits) != len(want_bits):
            print(f"  {name}: {len(got_bits)} elements, expected {len(want_bits)}")
            ok = False
            continue
        bad = np.nonzero((got_bits != want_bits) & ~both_nan)[0]
        if len(bad):
            i = bad[0]
            print(f"  {name}: {len(bad)} elements differ from torch .to(); first at {i}: "
                  f"source {src_t.flatten()[i].item()!r} -> {got_bits[i]:#x}, torch {want_bits[i]:#x}")
            ok = False
    if converted == 0:
        print("  nothing was converted: the fixture does not test anything")
        ok = False
    return ok


def main():
    cmd = sys.argv[1]
    if cmd == "json":
        return 0 if check_json(sys.argv[2], sys.argv[3]) else 1
    load_numeric()
    if cmd == "make":
        make(sys.argv[2])
        return 0
    if cmd == "inspect":
        return 0 if check_inspect(sys.argv[2], sys.argv[3], sys.argv[4]) else 1
    if cmd == "convert":
        all_ok = True
        for line in open(sys.argv[2]):
            args = line.split()
            if not args:
                continue
            ok = check_convert(args[0], args[1], args[2], args[3] if len(args) > 3 else "")
            print(("PASS" if ok else "FAIL") + " convert " + " ".join(args))
            all_ok = all_ok and ok
        return 0 if all_ok else 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
