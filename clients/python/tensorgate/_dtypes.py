"""The safetensors dtypes (the 22 of lib/st_dtype.h) and how each becomes a
NumPy array or a torch tensor from little-endian bytes."""

import json
import struct

import numpy as np

__all__ = ["DTYPES", "to_numpy", "to_torch", "parse_bytes", "CONVERSIONS"]

# name -> (bits per element, NumPy dtype string or None)
DTYPES = {
    "BOOL": (8, "?"),
    "U8": (8, "u1"),
    "I8": (8, "i1"),
    "F8_E5M2": (8, None),
    "F8_E4M3": (8, None),
    "F8_E8M0": (8, None),
    "F8_E4M3FNUZ": (8, None),
    "F8_E5M2FNUZ": (8, None),
    "I16": (16, "<i2"),
    "U16": (16, "<u2"),
    "F16": (16, "<f2"),
    "BF16": (16, None),
    "I32": (32, "<i4"),
    "U32": (32, "<u4"),
    "F32": (32, "<f4"),
    "C64": (64, "<c8"),
    "F64": (64, "<f8"),
    "I64": (64, "<i8"),
    "U64": (64, "<u8"),
    "F4": (4, None),
    "F6_E2M3": (6, None),
    "F6_E3M2": (6, None),
}

# What the server converts between with ?dtype= (a tensor's own dtype is always fine).
CONVERSIONS = ("F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2")

# name -> attribute of the torch module (looked up at run time: torch 1.13 has no
# float8 nor uint16/32/64; newer releases do)
_TORCH = {
    "BOOL": "bool",
    "U8": "uint8",
    "I8": "int8",
    "F8_E5M2": "float8_e5m2",
    "F8_E4M3": "float8_e4m3fn",
    "F8_E8M0": "float8_e8m0fnu",
    "F8_E4M3FNUZ": "float8_e4m3fnuz",
    "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "I16": "int16",
    "U16": "uint16",
    "F16": "float16",
    "BF16": "bfloat16",
    "I32": "int32",
    "U32": "uint32",
    "F32": "float32",
    "C64": "complex64",
    "F64": "float64",
    "I64": "int64",
    "U64": "uint64",
}


def _convertible_hint(dtype):
    if dtype in ("BF16", "F8_E5M2", "F8_E4M3"):
        return '; pass dtype="F32" (or "F16", "F64") to safe_open or load_file to have the server convert it'
    return ""


def numpy_dtype(dtype):
    """The NumPy dtype for a safetensors dtype name; TypeError if NumPy has none."""
    if dtype not in DTYPES:
        raise TypeError(f"tensorgate: unknown dtype {dtype!r}")
    code = DTYPES[dtype][1]
    if code is None:
        if dtype in ("BF16", "F8_E5M2", "F8_E4M3"):
            how = '; pass dtype="F32" (or "F16", "F64") to safe_open or load_file to have the server convert it'
            if dtype == "BF16":
                how += ', or use framework="pt"'
        else:
            how = "; the server converts only among " + ", ".join(CONVERSIONS) + ", so read it with another client"
        raise TypeError(f"tensorgate: NumPy has no {dtype} dtype{how}")
    return np.dtype(code)


def torch_dtype(dtype):
    """The torch dtype for a safetensors dtype name; TypeError if this torch has none."""
    import torch

    attr = _TORCH.get(dtype)
    if attr is None or not hasattr(torch, attr):
        raise TypeError(
            f"tensorgate: torch {torch.__version__} has no {dtype} dtype"
            + (f" (torch.{attr})" if attr else "")
            + _convertible_hint(dtype)
        )
    return getattr(torch, attr)


def to_numpy(buf, dtype, shape):
    """A writable NumPy array of shape from little-endian bytes."""
    nd = numpy_dtype(dtype)
    arr = np.frombuffer(buf if isinstance(buf, bytearray) else bytearray(buf), dtype=nd)
    return arr.reshape(shape)


def to_torch(buf, dtype, shape, device="cpu"):
    """A torch tensor of shape from little-endian bytes (little-endian host)."""
    import torch

    td = torch_dtype(dtype)
    if len(buf) == 0:
        t = torch.empty(tuple(shape), dtype=td)
    else:
        t = torch.frombuffer(buf if isinstance(buf, bytearray) else bytearray(buf), dtype=td).reshape(tuple(shape))
    if device and str(device) != "cpu":
        t = t.to(device)
    return t


def element_bytes(dtype, shape):
    n = 1
    for d in shape:
        n *= d
    bits = DTYPES[dtype][0] * n
    return bits // 8


def parse_header(data):
    """(header dict, data start) of safetensors bytes; ValueError if malformed."""
    if len(data) < 8:
        raise ValueError("tensorgate: safetensors data shorter than 8 bytes")
    (n,) = struct.unpack("<Q", bytes(data[:8]))
    if n > len(data) - 8:
        raise ValueError(f"tensorgate: header size {n} is beyond the data ({len(data)} bytes)")
    header = json.loads(bytes(data[8 : 8 + n]).decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError("tensorgate: the header is not a JSON object")
    return header, 8 + n


def parse_bytes(data):
    """[(name, dtype, shape, bytes)] and the metadata of safetensors bytes."""
    header, start = parse_header(data)
    meta = header.get("__metadata__")
    out = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, (b, e) = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in DTYPES:
            raise ValueError(f"tensorgate: tensor {name!r} has unknown dtype {dtype!r}")
        if not (0 <= b <= e <= len(data) - start):
            raise ValueError(f"tensorgate: tensor {name!r} data_offsets [{b}, {e}] are beyond the data")
        if e - b != element_bytes(dtype, shape):
            raise ValueError(f"tensorgate: tensor {name!r} has {e - b} bytes for {dtype} {shape}")
        out.append((name, dtype, shape, data[start + b : start + e]))
    return out, meta
