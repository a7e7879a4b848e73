#!/usr/bin/python3
"""Writes the dtype-conversion test vectors read by tests/unit/lib/st_convert.c.

Run with /usr/bin/python3 (numpy + torch 1.13):  /usr/bin/python3 tests/vectors/gen_convert_vectors.py

Files (all raw little-endian, no header; the element count is size / element size):
  in_<SRC>.bin            inputs of dtype SRC
  <SRC>_to_<DST>.bin      expected outputs, one per input, in the same order

SRC/DST are F64, F32, F16, BF16, F8_E4M3, F8_E5M2 (safetensors names).

Where the expectations come from:
  * F64/F32/F16/BF16 <-> each other: torch.Tensor.to() itself. torch runs with
    ATEN_CPU_CAPABILITY=default: its AVX2 copy kernel writes NaN -> BF16 as 0xFFFF
    for the vectorised part of a tensor and 0x7FC0 for the scalar tail (so the
    byte depends on tensor length); c10's BFloat16 type defines 0x7FC0, which is
    what the default kernel writes everywhere. `--compare-avx2` reruns torch with
    its AVX2 kernels and reports where the two differ (only NaN -> BF16 should).
  * Anything with F8 (torch 1.13 has no float8): an independent reference below,
    exact rational arithmetic (fractions.Fraction) per the OCP 8-bit Floating Point
    Specification (OFP8), with PyTorch's rules for float8_e4m3fn / float8_e5m2
    (c10/util/Float8_e4m3fn.h, Float8_e5m2.h), and torch's own F32 <-> F16/BF16/F64
    for the other leg, because PyTorch converts F8 <-> anything through float.
"""
import os
import struct
import sys
from fractions import Fraction

# read by torch at import: the default (scalar) kernels for generating, AVX2 to compare
os.environ["ATEN_CPU_CAPABILITY"] = "avx2" if "--compare-avx2" in sys.argv else "default"

import numpy as np  # noqa: E402
import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TYPES = ["F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"]
WIDTH = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1}
UINT = {8: np.uint64, 4: np.uint32, 2: np.uint16, 1: np.uint8}
TORCH = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}

# ---------------------------------------------------------------------------
# OFP8 reference (exact arithmetic)
#
# E4M3 (OCP): bias 7, 3 mantissa bits, subnormals at exponent field 0, no
#   infinities, NaN only S.1111.111; largest finite 448 = S.1111.110.
# E5M2 (OCP): bias 15, 2 mantissa bits, IEEE-like: Inf S.11111.00, NaN
#   S.11111.{01,10,11}; largest finite 57344.
# PyTorch's conversion from float (c10), stated as rules:
#   * round to nearest, ties to even, on the format's grid extended upward;
#   * float8_e4m3fn: NaN, +-Inf and any value whose rounded magnitude exceeds 448
#     (so |x| > 464; 464 itself ties to even 448) -> S.1111.111 (0x7F / 0xFF,
#     sign kept). No saturation.
#   * float8_e5m2: NaN -> S.11111.11 (0x7F / 0xFF); +-Inf and any value rounding
#     above 57344 (|x| >= 61440, the tie going to the even 2^16) -> S.11111.00.
#   * the sign bit is carried over for every result, including zero and NaN.
# PyTorch's conversion to float:
#   * float8_e4m3fn NaN -> float bits S | 0x7FF00000 (what c10's decoder builds:
#     the exponent forced to all ones over the shifted code);
#   * float8_e5m2 is decoded as the F16 with the same high byte, so its NaNs
#     follow torch's F16 -> F32 (checked against torch below).
# ---------------------------------------------------------------------------

FP8 = {
    "F8_E4M3": dict(mantissa_bits=3, bias=7, max_finite=Fraction(448)),
    "F8_E5M2": dict(mantissa_bits=2, bias=15, max_finite=Fraction(57344)),
}


def fp8_value(fmt, code):
    """Exact value of a code, or None for NaN, or 'inf'/'-inf'."""
    spec = FP8[fmt]
    m_bits, bias = spec["mantissa_bits"], spec["bias"]
    e_bits = 7 - m_bits
    sign = -1 if code & 0x80 else 1
    exponent = (code >> m_bits) & ((1 << e_bits) - 1)
    mantissa = code & ((1 << m_bits) - 1)
    if fmt == "F8_E4M3" and (code & 0x7F) == 0x7F:
        return None
    if fmt == "F8_E5M2" and exponent == 31:
        return None if mantissa else ("inf" if sign > 0 else "-inf")
    if exponent == 0:
        magnitude = Fraction(mantissa, 1 << m_bits) * Fraction(2) ** (1 - bias)
    else:
        magnitude = (1 + Fraction(mantissa, 1 << m_bits)) * Fraction(2) ** (exponent - bias)
    return sign * magnitude


def fp8_encode_magnitude(fmt, v):
    """RNE of an exact non-negative Fraction onto the extended grid; returns the code
    (without sign), or None when the rounded value exceeds the largest finite."""
    spec = FP8[fmt]
    m_bits, bias = spec["mantissa_bits"], spec["bias"]
    if v == 0:
        return 0
    emin = 1 - bias
    # exponent e with 2^e <= v < 2^(e+1)
    e = v.numerator.bit_length() - v.denominator.bit_length()
    if Fraction(2) ** e > v:
        e -= 1
    e = max(e, emin)
    quantum = Fraction(2) ** (e - m_bits)
    q = v / quantum
    n = q.numerator // q.denominator
    rest = q - n
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and n % 2 == 1):
        n += 1
    rounded = n * quantum
    if rounded > spec["max_finite"]:
        return None
    if rounded == 0:
        return 0
    # express the rounded value as a code
    if rounded < Fraction(2) ** emin:
        return int(rounded / (Fraction(2) ** emin / (1 << m_bits)))
    e = rounded.numerator.bit_length() - rounded.denominator.bit_length()
    if Fraction(2) ** e > rounded:
        e -= 1
    mantissa = (rounded / Fraction(2) ** e - 1) * (1 << m_bits)
    assert mantissa.denominator == 1
    return ((e + bias) << m_bits) | int(mantissa)


def fp8_from_f32_bits(fmt, bits):
    sign = (bits >> 31) << 7
    f = struct.unpack("<f", struct.pack("<I", bits))[0]
    if f != f:
        return sign | 0x7F
    if f in (float("inf"), float("-inf")):
        return sign | (0x7F if fmt == "F8_E4M3" else 0x7C)
    code = fp8_encode_magnitude(fmt, Fraction(abs(f)))
    if code is None:
        return sign | (0x7F if fmt == "F8_E4M3" else 0x7C)
    return sign | code


def f32_bits_of_fraction(v, negative):
    """Float bits of an exact value known to be representable in float32."""
    f = float(v)  # exact: every FP8 value fits a double and a float
    bits = struct.unpack("<I", struct.pack("<f", f))[0]
    assert Fraction(struct.unpack("<f", struct.pack("<I", bits))[0]) == v
    return bits | (0x80000000 if negative else 0)


def fp8_to_f32_bits(fmt, code):
    negative = bool(code & 0x80)
    v = fp8_value(fmt, code)
    if v is None:
        if fmt == "F8_E4M3":
            return (0x80000000 if negative else 0) | 0x7FF00000
        half = np.array([code << 8], dtype=np.uint16).view(np.float16)
        bits = int(torch.from_numpy(half).float().numpy().view(np.uint32)[0])
        assert (bits & 0x7F800000) == 0x7F800000 and (bits & 0x7FFFFF) != 0
        return bits
    if v == "inf" or v == "-inf":
        return (0x80000000 if v == "-inf" else 0) | 0x7F800000
    return f32_bits_of_fraction(abs(v), negative)


def self_check_fp8():
    """Known facts of the OFP8 spec and of c10's rules, asserted before any file is written."""
    e4 = lambda x: fp8_from_f32_bits("F8_E4M3", struct.unpack("<I", struct.pack("<f", x))[0])
    e5 = lambda x: fp8_from_f32_bits("F8_E5M2", struct.unpack("<I", struct.pack("<f", x))[0])
    assert fp8_value("F8_E4M3", 0x7E) == 448 and fp8_value("F8_E4M3", 0x01) == Fraction(1, 512)
    assert fp8_value("F8_E4M3", 0x08) == Fraction(1, 64) and fp8_value("F8_E4M3", 0x38) == 1
    assert fp8_value("F8_E5M2", 0x7B) == 57344 and fp8_value("F8_E5M2", 0x01) == Fraction(1, 65536)
    assert fp8_value("F8_E5M2", 0x3C) == 1 and fp8_value("F8_E5M2", 0x7C) == "inf"
    assert e4(448.0) == 0x7E and e4(464.0) == 0x7E and e4(465.0) == 0x7F and e4(480.0) == 0x7F
    assert e4(-1e30) == 0xFF and e4(float("inf")) == 0x7F and e4(float("-nan")) == 0xFF
    assert e4(2.0 ** -10) == 0x00 and e4(2.0 ** -10 * 1.0001) == 0x01 and e4(-0.0) == 0x80
    assert e5(57344.0) == 0x7B and e5(61439.0) == 0x7B and e5(61440.0) == 0x7C
    assert e5(float("nan")) == 0x7F and e5(float("-inf")) == 0xFC and e5(2.0 ** -17) == 0x00
    assert e5(3 * 2.0 ** -17) == 0x02  # 1.5 units ties to even 2


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------

def f32(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def f64(x):
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def f64_value(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def grid_points(mantissa_bits, bias, exp_max_field, max_code_field):
    """Representable magnitudes of a binary format (exact), including one step past
    the largest finite, used to place halfway points."""
    values = []
    for e_field in range(0, exp_max_field + 1):
        for m in range(1 << mantissa_bits):
            if e_field == 0:
                v = Fraction(m, 1 << mantissa_bits) * Fraction(2) ** (1 - bias)
            else:
                v = (1 + Fraction(m, 1 << mantissa_bits)) * Fraction(2) ** (e_field - bias)
            values.append(v)
    return values[: max_code_field + 2]


def boundary_values(rng):
    """Exact rational points where rounding decisions happen, for every target format:
    representable values, halfway points, for a sample of each format's codes."""
    points = set()
    formats = [
        # (mantissa bits, bias, last exponent field used, last finite code)
        (10, 15, 31, 0x7BFF),  # F16
        (7, 127, 255, 0x7F7F),  # BF16
        (3, 7, 15, 0x7E),  # E4M3
        (2, 15, 31, 0x7B),  # E5M2
    ]
    for m_bits, bias, e_max, last in formats:
        grid = grid_points(m_bits, bias, e_max, last)
        n_codes = len(grid) - 1  # the last entry is one past the largest finite
        per_exp = 1 << m_bits
        chosen = set()
        for code in range(n_codes):
            m = code % per_exp
            # every code of small formats; for F16/BF16 the mantissa ends and a random few
            if n_codes <= 256 or m in (0, 1, 2, per_exp // 2, per_exp - 2, per_exp - 1) or rng.random() < 0.02:
                chosen.add(code)
        for code in sorted(chosen):
            lo, hi = grid[code], grid[code + 1]
            points.add(lo)
            points.add((lo + hi) / 2)
        points.add(grid[-1])
        points.add(grid[1] / 2)  # half the smallest subnormal
        points.add(grid[1] / 4)
    return points


def f32_inputs(rng):
    bits = set()
    specials = [
        0x00000000, 0x00000001, 0x00000002, 0x007FFFFF, 0x00800000, 0x00800001, 0x3F800000,
        0x7F7FFFFF, 0x7F7F7FFF, 0x7F7F8000, 0x7F7F8001, 0x7F7EFFFF, 0x7F7F0000,
        0x7F800000, 0x7F800001, 0x7F800002, 0x7F802000, 0x7F810000, 0x7FA00000, 0x7FBFFFFF,
        0x7FC00000, 0x7FC00001, 0x7FC02000, 0x7FE00000, 0x7FFFE000, 0x7FFFFFFF,
        0x477FE000, 0x477FEFFF, 0x477FF000, 0x477FF001, 0x47800000, 0x477FFFFF,  # F16 overflow
        0x33000000, 0x33000001, 0x32FFFFFF, 0x33400000, 0x33800000,  # F16 subnormal edge
        0x387FC000, 0x387FE000, 0x387FF000, 0x38800000,  # F16 subnormal/normal edge
        0x43E00000, 0x43E80000, 0x43E80001, 0x43E7FFFF, 0x43F00000, 0x43EFFFFF,  # E4M3 top
        0x3A800000, 0x3A800001, 0x3B000000,  # E4M3 bottom
        0x47600000, 0x476FFFFF, 0x47700000, 0x47700001,  # E5M2 top
        0x37000000, 0x37000001, 0x37800000,  # E5M2 bottom
    ]
    for b in specials:
        bits.add(b)
        bits.add(b | 0x80000000)
    for v in boundary_values(rng):
        try:
            b = f32(float(v))  # the nearest float (exact for every halfway point but BF16's)
        except OverflowError:
            continue
        if b == 0:
            continue
        sign = 0x80000000 if rng.random() < 0.5 else 0
        for d in (-1, 0, 1):
            nb = b + d
            if 0 <= nb < 0x7F800000:
                bits.add(nb | sign)
    for _ in range(2048):
        bits.add(rng.getrandbits(32))
    for _ in range(2048):
        # random values in the range where the 16- and 8-bit formats live
        exponent = rng.randrange(95, 150)
        bits.add((rng.getrandbits(1) << 31) | (exponent << 23) | rng.getrandbits(23))
    return np.array(sorted(bits), dtype=np.uint32)


def f64_inputs(rng, f32_in):
    bits = set()
    specials = [
        0x0000000000000000, 0x0000000000000001, 0x000FFFFFFFFFFFFF, 0x0010000000000000,
        0x7FEFFFFFFFFFFFFF, 0x7FF0000000000000, 0x7FF0000000000001, 0x7FF0000020000000,
        0x7FF4000000000000, 0x7FF7FFFFFFFFFFFF, 0x7FF8000000000000, 0x7FF8000000000001,
        0x7FFC000000000000, 0x7FFFFFFFFFFFFFFF, 0x7FF8000020000000, 0x7FF0000010000000,
        f64(3.4028234663852886e38),  # FLT_MAX
        f64(float.fromhex("0x1.fffffefffffffp+127")),  # just below FLT_MAX + half ulp
        f64(float.fromhex("0x1.ffffffp+127")),  # FLT_MAX + half ulp: ties to even -> Inf
        f64(float.fromhex("0x1.ffffff0000001p+127")),
        f64(float.fromhex("0x1p+128")),
        f64(2.0 ** -149), f64(2.0 ** -150), f64(float.fromhex("0x1.0000000000001p-150")),
        f64(float.fromhex("0x1.fffffffffffffp-151")), f64(3 * 2.0 ** -151), f64(2.0 ** -160),
        f64(65504.0), f64(65519.99999999999), f64(65520.0), f64(float.fromhex("0x1.ffe0000000001p+15")),
        f64(448.0), f64(464.0), f64(float.fromhex("0x1.d000000000001p+8")), f64(480.0),
        f64(57344.0), f64(61440.0), f64(float.fromhex("0x1.dffffffffffffp+15")),
    ]
    for b in specials:
        bits.add(b)
        bits.add(b | 0x8000000000000000)
    # every F32 input, exactly
    for b in f32_in[::5]:
        f = struct.unpack("<f", struct.pack("<I", int(b)))[0]
        if f == f:
            bits.add(f64(f))
    # halfway points of F32 (between two floats) and one double ulp either side: decide
    # the F64 -> F32 rounding, and since torch rounds F64 -> F32 -> F16/BF16/F8, a value a
    # hair above an F16 halfway point lands on the halfway float and ties to even.
    for b in f32_in[1::7]:
        b = int(b) & 0x7FFFFFFF
        if b >= 0x7F7FFFFF:
            continue
        lo = struct.unpack("<f", struct.pack("<I", b))[0]
        hi = struct.unpack("<f", struct.pack("<I", b + 1))[0]
        mid = (Fraction(lo) + Fraction(hi)) / 2
        m = f64(float(mid))
        sign = 0x8000000000000000 if rng.random() < 0.5 else 0
        for d in (-1, 0, 1):
            bits.add((m + d) | sign)
    for v in boundary_values(rng):
        if v == 0:
            continue
        if rng.random() < 0.5:
            continue
        m = f64(float(v))
        for d in (-1, 1):
            bits.add(m + d)
    for _ in range(2048):
        bits.add(rng.getrandbits(64))
    for _ in range(2048):
        exponent = rng.randrange(1023 - 160, 1023 + 130)
        bits.add((rng.getrandbits(1) << 63) | (exponent << 52) | rng.getrandbits(52))
    return np.array(sorted(bits), dtype=np.uint64)


# ---------------------------------------------------------------------------
# expectations
# ---------------------------------------------------------------------------

def as_torch(name, raw):
    if name == "BF16":
        return torch.from_numpy(raw.astype(np.uint16).view(np.int16).copy()).view(torch.bfloat16)
    view = {"F64": np.float64, "F32": np.float32, "F16": np.float16}[name]
    return torch.from_numpy(raw.view(view).copy())


def torch_bits(tensor, name):
    if name == "BF16":
        return tensor.view(torch.int16).numpy().view(np.uint16).copy()
    return tensor.numpy().view(UINT[WIDTH[name]]).copy()


def expected(src, dst, raw):
    """Expected output bits of converting raw (uint array of src) to dst."""
    if src == dst:
        return raw.copy()
    if src.startswith("F8"):
        f32_bits = np.array([fp8_to_f32_bits(src, int(c)) for c in raw], dtype=np.uint32)
        if dst == "F32":
            return f32_bits
        return expected("F32", dst, f32_bits)
    if dst.startswith("F8"):
        # PyTorch builds the float8 value from a float: src -> F32 by torch, then the reference
        f32_bits = expected(src, "F32", raw) if src != "F32" else raw
        return np.array([fp8_from_f32_bits(dst, int(b)) for b in f32_bits], dtype=np.uint8)
    out = torch_bits(as_torch(src, raw).to(TORCH[dst]), dst)
    if dst == "BF16":
        # the default (scalar) kernel: every NaN is the canonical 0x7FC0
        src_is_nan = torch.isnan(as_torch(src, raw)).numpy()
        assert np.all(out[src_is_nan] == 0x7FC0), "torch wrote a non-canonical BF16 NaN"
    return out


def all_inputs():
    import random

    rng = random.Random(20240601)
    f32_in = f32_inputs(rng)
    return {
        "F16": np.arange(65536, dtype=np.uint32).astype(np.uint16),
        "BF16": np.arange(65536, dtype=np.uint32).astype(np.uint16),
        "F32": f32_in,
        "F64": f64_inputs(rng, f32_in),
        "F8_E4M3": np.arange(256, dtype=np.uint16).astype(np.uint8),
        "F8_E5M2": np.arange(256, dtype=np.uint16).astype(np.uint8),
    }


def generate():
    self_check_fp8()
    inputs = all_inputs()
    total = 0
    for src in TYPES:
        raw = inputs[src]
        path = os.path.join(HERE, f"in_{src}.bin")
        raw.astype(UINT[WIDTH[src]]).astype(f"<u{WIDTH[src]}").tofile(path)
        total += os.path.getsize(path)
        for dst in TYPES:
            if dst == src:
                continue
            out = expected(src, dst, raw).astype(UINT[WIDTH[dst]])
            assert len(out) == len(raw)
            path = os.path.join(HERE, f"{src}_to_{dst}.bin")
            out.astype(f"<u{WIDTH[dst]}").tofile(path)
            total += os.path.getsize(path)
        print(f"{src}: {len(raw)} inputs")
    print(f"wrote {total} bytes of vectors to {HERE}")


def compare_avx2():
    """Reruns the torch-derived pairs with torch's AVX2 kernels and lists where they
    differ from the files."""
    differences = 0
    for src in ["F64", "F32", "F16", "BF16"]:
        raw = np.fromfile(os.path.join(HERE, f"in_{src}.bin"), dtype=f"<u{WIDTH[src]}")
        for dst in ["F64", "F32", "F16", "BF16"]:
            if dst == src:
                continue
            want = np.fromfile(os.path.join(HERE, f"{src}_to_{dst}.bin"), dtype=f"<u{WIDTH[dst]}")
            got = torch_bits(as_torch(src, raw).to(TORCH[dst]), dst)
            bad = np.nonzero(got != want)[0]
            nan_in = torch.isnan(as_torch(src, raw)).numpy()
            only_nan = bool(np.all(nan_in[bad])) if len(bad) else True
            print(f"{src}->{dst}: {len(bad)} differ under AVX2 (all NaN inputs: {only_nan})")
            for i in bad[:3]:
                print(f"   in {int(raw[i]):#x} file {int(want[i]):#x} avx2 {int(got[i]):#x}")
            differences += 0 if only_nan else len(bad)
    return differences


if __name__ == "__main__":
    if "--compare-avx2" in sys.argv:
        sys.exit(1 if compare_avx2() else 0)
    generate()
