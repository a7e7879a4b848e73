#!/usr/bin/python3
"""Value check of the tensor streaming engine (server/ingest/tensor_stream.c).

Writes safetensors files with torch/numpy, asks the engine CLI
(`tensor_values batch REQUESTS RESULTS`, built from tests/unit/server/ingest/tensor_values.c)
for raw and .npy bodies under ?slice= / ?dtype= / ?format=, and compares them with
an independent reference:
  - slicing: NumPy basic indexing on the source bits (the slice text parsed here
    into Python slice/int objects with the documented grammar);
  - conversion among F64/F32/F16/BF16: torch .to() (bit for bit; where both sides
    are NaN only NaN-ness is compared, as torch 1.13's own scalar and vector paths
    write different NaN payloads);
  - conversion to F8_E4M3/F8_E5M2 (torch 1.13 has no float8): round to nearest
    even onto the table of every F8 value, after the F32 step that torch's
    conversions take (double -> float -> float8); E4M3 has no Inf, magnitudes
    from 480 up (the next step past 448) and Inf/NaN become NaN 0x7F; E5M2
    overflows to Inf from 61440 up (ties to even against 57344);
  - F8 sources are decoded through the same tables;
  - .npy: numpy.load of the body, dtype/shape/values;
  - refusals: whatever NumPy refuses (IndexError/ValueError) or the grammar refuses
    must be a 400, with the dimension NumPy names.
Prints "check_values: N checks, M failures"; exit 0, 1 on failures, 77 without torch.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys

try:
    import numpy as np
    import torch
except ImportError:
    print("check_values: numpy/torch missing, skipped")
    sys.exit(77)

CHECKS = 0
FAILURES = []

FLOATS = ["F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"]
SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I32": 4,
        "I64": 8, "U8": 1, "BOOL": 1, "C64": 8, "I16": 2}
BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
NPY = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I32": "<i4", "I64": "<i8", "U8": "|u1",
       "BOOL": "|b1", "C64": "<c8", "I16": "<i2"}
TORCH = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def check(cond, what):
    global CHECKS
    CHECKS += 1
    if not cond:
        FAILURES.append(what)
        if len(FAILURES) <= 30:
            print("FAIL:", what)
    return cond


# ---------- F8 tables (from the format definitions, not from any library) ----------

def f8_value(bits, exp_bits, man_bits, bias, e4m3):
    sign = -1.0 if bits & 0x80 else 1.0
    e = (bits >> man_bits) & ((1 << exp_bits) - 1)
    m = bits & ((1 << man_bits) - 1)
    if e4m3 and e == 15 and m == 7:
        return float("nan")
    if not e4m3 and e == 31:
        return sign * float("inf") if m == 0 else float("nan")
    if e == 0:
        return sign * m / (1 << man_bits) * 2.0 ** (1 - bias)
    return sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)


E4M3 = np.array([f8_value(b, 4, 3, 7, True) for b in range(256)])
E5M2 = np.array([f8_value(b, 5, 2, 15, False) for b in range(256)])


def f8_encode(values, kind):
    """float32-exact values (as float64) -> F8 bytes, round to nearest even."""
    table = E4M3 if kind == "F8_E4M3" else E5M2
    # positive grid: bit patterns 0..0x7E (E4M3) / 0..0x7B (E5M2) plus the overflow step
    top = 0x7E if kind == "F8_E4M3" else 0x7B
    grid = list(table[:top + 1])
    overflow_value = 480.0 if kind == "F8_E4M3" else 65536.0
    overflow_bits = 0x7F if kind == "F8_E4M3" else 0x7C
    grid.append(overflow_value)
    grid = np.array(grid)
    patterns = np.arange(top + 2)
    patterns[-1] = overflow_bits
    v = np.asarray(values, dtype=np.float64)
    sign = np.where(np.signbit(v), 0x80, 0).astype(np.int64)
    a = np.abs(v)
    finite = ~np.isnan(a) & (a < overflow_value)
    a_in = np.where(finite, a, 0.0)
    j = np.clip(np.searchsorted(grid, a_in), 1, len(grid) - 1)  # grid[j-1] < a <= grid[j]
    lo, hi = grid[j - 1], grid[j]
    exact_hi = hi == a_in
    below, above = a_in - lo, hi - a_in
    even_lo = (patterns[j - 1] & 1) == 0
    k = np.where(exact_hi | (above < below) | ((above == below) & ~even_lo), j, j - 1)
    k = np.where(a_in == 0.0, 0, k)
    out = patterns[k]
    out = np.where(np.isnan(v), 0x7F, out)
    out = np.where(~np.isnan(v) & (a >= overflow_value), overflow_bits, out)
    return (out | sign).astype(np.uint8).tobytes()


# ---------- conversions ----------

def to_float(dtype, raw):
    """Source bytes -> torch tensor of a float dtype (F8 decoded exactly to float32)."""
    if dtype in ("F8_E4M3", "F8_E5M2"):
        table = E4M3 if dtype == "F8_E4M3" else E5M2
        return torch.from_numpy(table[np.frombuffer(raw, dtype=np.uint8)].astype(np.float32))
    if dtype == "BF16":
        return torch.frombuffer(bytearray(raw), dtype=torch.int16).view(torch.bfloat16) \
            if raw else torch.zeros(0, dtype=torch.bfloat16)
    return torch.from_numpy(np.frombuffer(raw, dtype=NPY[dtype]).copy())


def torch_bytes(t):
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def convert(src, dst, raw):
    if src == dst:
        return raw
    t = to_float(src, raw)
    if dst in ("F8_E4M3", "F8_E5M2"):
        # torch converts to float8 from float32
        return f8_encode(t.to(torch.float32).numpy().astype(np.float64), dst)
    return torch_bytes(t.to(TORCH[dst]))


def decode_any(dtype, raw):
    if dtype in ("F8_E4M3", "F8_E5M2", "BF16"):
        return to_float(dtype, raw).to(torch.float64).numpy()
    if dtype in NPY:
        return np.frombuffer(raw, dtype=NPY[dtype])
    return None


def same_bits(dtype, got, want):
    """Bit equality, except that two NaNs are equal whatever their payload."""
    if got == want:
        return True, ""
    size = SIZE[dtype]
    if len(got) != len(want):
        return False, f"{len(got)} bytes, expected {len(want)}"
    if dtype not in FLOATS:
        return False, "bytes differ"
    g, w = decode_any(dtype, got), decode_any(dtype, want)
    gb, wb = np.frombuffer(got, dtype=BITS[size]), np.frombuffer(want, dtype=BITS[size])
    bad = np.nonzero((gb != wb) & ~(np.isnan(g) & np.isnan(w)))[0]
    if len(bad) == 0:
        return True, ""
    i = bad[0]
    return False, f"{len(bad)} elements differ, first at {i}: {gb[i]:#x} expected {wb[i]:#x}"


# ---------- slicing ----------

INT = r"-?[0-9]+"
ITEM = re.compile(rf"^({INT})$|^({INT})?:({INT})?(?::({INT})?)?$")


def parse_slice(text):
    """The documented grammar -> tuple of int/slice; SyntaxError otherwise."""
    if text is None or text == "":
        return ()
    items = []
    for part in text.split(","):
        m = ITEM.match(part)
        if not m or part != part.strip():
            raise SyntaxError(part)
        if m.group(1) is not None:
            items.append(int(m.group(1)))
        else:
            s = [None if g is None else int(g) for g in m.group(2, 3, 4)]
            items.append(slice(*s))
    for v in items:
        for x in ([v] if isinstance(v, int) else [v.start, v.stop, v.step]):
            if x is not None and not -(2 ** 63) < x < 2 ** 63:
                raise OverflowError(text)
    return tuple(items)


def select(dtype, shape, raw, text):
    """NumPy basic indexing on the source bits -> (shape, bytes); raises like NumPy."""
    size = SIZE[dtype]
    bits = np.frombuffer(raw, dtype=BITS[size]).reshape(shape)
    index = parse_slice(text)
    picked = bits[index]
    return list(np.shape(picked)), np.ascontiguousarray(picked).tobytes()


# ---------- files ----------

def write_st(path, tensors):
    """tensors: list of (name, dtype, shape, raw), data in this order."""
    header, offset = {}, 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for t in tensors:
            f.write(t[3])


SPECIALS = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 448.0, 464.0, 470.0, 479.9, 480.0,
            -500.0, 57344.0, 61439.0, 61440.0, 65504.0, 65520.0, 1e-40, -1e-45, 3.4e38, 1e-8,
            2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11, 2.0 ** -16, 2.0 ** -17, 1.0 + 2.0 ** -8,
            1.0 + 3 * 2.0 ** -8, 1.0 + 2.0 ** -24, 0.0625, 0.1, -0.3333, 1e300, -1e-300]


def float_values(n, gen):
    scales = gen.choice([1e-6, 1e-3, 1.0, 30.0, 500.0, 7e4], size=n)
    v = gen.standard_normal(n) * scales
    k = min(n, len(SPECIALS))
    v[:k] = SPECIALS[:k]
    gen.shuffle(v)
    return v


def make_raw(dtype, shape, gen):
    n = int(np.prod(shape)) if shape else 1
    if dtype in ("F8_E4M3", "F8_E5M2"):
        return gen.integers(0, 256, size=n, dtype=np.uint8).tobytes()
    if dtype in TORCH:
        return torch_bytes(torch.from_numpy(float_values(n, gen)).to(TORCH[dtype]))
    if dtype == "BOOL":
        return gen.integers(0, 2, size=n, dtype=np.uint8).tobytes()
    if dtype == "C64":
        return gen.standard_normal(2 * n).astype(np.float32).tobytes()
    return gen.integers(-100, 100, size=n).astype(NPY[dtype]).tobytes()


SLICES = [None, "", "1", "-1", "0:0", "1:3", "::2", "::-1", "-3:-1", "-100:100", "1,2", "-1,-1,-1",
          ":,1:5:2,::-3", "4:0:-2,::-1", ":,:,3", "2:,-2", "::3,::2,::4", "3:1", "::-2,0,1:",
          ":,-7:"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--dir", required=True)
    args = ap.parse_args()
    gen = np.random.default_rng(20240531)
    d = args.dir

    specs = [(f"src_{t}", t, (5, 6, 7)) for t in FLOATS]
    specs += [("five_d", "F32", (2, 3, 4, 1, 5)), ("scalar", "BF16", ()), ("empty", "F16", (0, 3)),
              ("ints", "I32", (4, 5)), ("bytes", "U8", (9,)), ("flags", "BOOL", (3, 3)),
              ("complex", "C64", (2, 3)), ("big", "F32", (700, 1000)), ("big_bf16", "BF16", (300, 2100))]
    tensors = [(name, dtype, shape, make_raw(dtype, shape, gen)) for name, dtype, shape in specs]
    path = os.path.join(d, "values.safetensors")
    write_st(path, tensors)
    by_name = {t[0]: t for t in tensors}

    requests, expects = [], []

    def ask(name, slice_text, dtype, fmt, expect):
        out = os.path.join(d, f"out_{len(requests)}.bin")
        requests.append({"file": path, "tensor": name, "slice": slice_text, "dtype": dtype,
                         "format": fmt, "out": out})
        expects.append(expect)

    def plan(name, slice_text, dtype, fmt):
        _, src, shape, raw = by_name[name]
        target = dtype or src
        try:
            out_shape, picked = select(src, shape, raw, slice_text)
        except SyntaxError:
            return {"status": 400, "why": "grammar"}
        except (IndexError, ValueError, OverflowError) as e:
            m = re.search(r"(?:axis|dimension) (\d+)", str(e))
            return {"status": 400, "why": str(e), "dim": int(m.group(1)) if m else None}
        if dtype and dtype != src and not (src in FLOATS and dtype in FLOATS):
            return {"status": 422}
        if fmt == "npy" and target not in NPY:
            return {"status": 406}
        return {"status": 200, "dtype": target, "shape": out_shape,
                "body": convert(src, target, picked)}

    for name, src, shape in specs:
        if name.startswith("big"):
            continue
        slices = SLICES if len(shape) >= 2 else [None, "", "0", "-1", "::-2", "1:", "3:100"]
        if name == "scalar":
            slices = [None, "", "0", ":"]
        targets = [None] + (FLOATS if src in FLOATS else [src])
        for s in slices:
            for t in targets:
                for fmt in (None, "npy"):
                    ask(name, s, t, fmt, plan(name, s, t, fmt))
    # larger than the engine's 1 MiB window: strided, reversed, converted
    for name in ("big", "big_bf16"):
        for s, t, fmt in [(None, None, None), ("::-1", "F16", "npy"), (":,::-3", "BF16", None),
                          ("::7,5:-5", "F8_E4M3", None), (":,-1", "F64", "npy"),
                          ("-2::-1,::-1", "F8_E5M2", None), ("10:250", None, None), ("3", "F32", "npy")]:
            ask(name, s, t, fmt, plan(name, s, t, fmt))
    # hostile slice text: refusals must be 400 and agree with the grammar/NumPy
    hostile = ["1:2:3:4", " 1", "1 ", "1,", ",", ",1", "--1", "1,,2", "a", "0x1", "+1", "1.0", "1e3",
               "[1]", "...", "None", "1;2", "::0", "5", "-6", "0,6", "0,0,7", "0,0,-8", "1,2,3,4",
               "99999999999999999999", "-9223372036854775808", "9223372036854775807",
               ":9223372036854775807", "-9223372036854775807:", "::-9223372036854775807",
               "\u00e9", "1\u00a0", ":" * 5000, "0:1" + ",:" * 70, "\t", ":\n"]
    for s in hostile:
        for t in (None, "F16"):
            ask("src_F32", s, t, None, plan("src_F32", s, t, None))
    # refusals on dtype and format
    for name, t, fmt in [("src_BF16", None, "npy"), ("src_F32", "BF16", "npy"), ("src_F8_E4M3", None, "npy"),
                         ("ints", "F32", None), ("flags", "F16", None), ("src_F32", "I32", None),
                         ("src_F32", "f32", None), ("src_F32", "F33", None), ("src_F32", None, "NPY"),
                         ("src_F32", None, "npz"), ("src_F32", "", "raw")]:
        expect = plan(name, None, t, fmt)
        if t is not None and t != "" and t not in SIZE and t not in FLOATS:
            expect = {"status": 400}
        if fmt not in (None, "", "raw", "npy"):
            expect = {"status": 400}
        ask(name, None, t, fmt, expect)

    req_path, res_path = os.path.join(d, "requests.json"), os.path.join(d, "results.json")
    json.dump(requests, open(req_path, "w"))
    rc = subprocess.run([args.cli, "batch", req_path, res_path]).returncode
    if not check(rc == 0, f"engine CLI exit {rc}"):
        return finish()
    results = json.load(open(res_path))
    check(len(results) == len(requests), "one result per request")

    for req, expect, res in zip(requests, expects, results):
        what = f"{req['tensor']} slice={req['slice']!r} dtype={req['dtype']} format={req['format']}"
        if expect["status"] != 200:
            if not check(res.get("ok") is False and res.get("status") == expect["status"],
                         f"{what}: expected {expect['status']}, got {res}"):
                continue
            if expect.get("dim") is not None:
                check(res.get("dim") == expect["dim"] and f"dimension {expect['dim']}" in res["detail"],
                      f"{what}: NumPy names axis {expect['dim']} ({expect['why']}), engine: {res}")
            continue
        if not check(res.get("ok") is True, f"{what}: refused or failed: {res}"):
            continue
        check(res["generator_matches"], f"{what}: generator differs from the sendfile range")
        check(res["dtype"] == expect["dtype"], f"{what}: dtype {res['dtype']} != {expect['dtype']}")
        check(res["shape"] == expect["shape"], f"{what}: shape {res['shape']} != {expect['shape']}")
        body = open(req["out"], "rb").read()
        check(len(body) == res["length"], f"{what}: body of {len(body)} bytes, plan says {res['length']}")
        payload = body[res["header_length"]:]
        ok, why = same_bits(expect["dtype"], payload, expect["body"])
        check(ok, f"{what}: {why}")
        if req["format"] == "npy":
            try:
                arr = np.load(req["out"], allow_pickle=False)
            except Exception as e:  # noqa: BLE001 - any failure to load is the finding
                check(False, f"{what}: numpy.load failed: {e}")
                continue
            check(arr.dtype.str == NPY[expect["dtype"]] or (arr.dtype == np.bool_ and expect["dtype"] == "BOOL"),
                  f"{what}: npy dtype {arr.dtype.str}")
            check(list(arr.shape) == expect["shape"], f"{what}: npy shape {arr.shape}")
            ok, why = same_bits(expect["dtype"], arr.tobytes(), expect["body"])
            check(ok, f"{what}: npy values: {why}")
        else:
            check(res["header_length"] == 0, f"{what}: raw body has a header")
        os.unlink(req["out"])
    return finish()


def finish():
    print(f"check_values: {CHECKS} checks, {len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
