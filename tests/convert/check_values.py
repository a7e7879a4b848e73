#!/usr/bin/python3
"""Checks a converted safetensors file against PyTorch's Tensor.to().

usage: check_values.py SOURCE CONVERTED DTYPE [GLOB,GLOB...]

Each floating tensor of SOURCE whose name matches a GLOB (fnmatch; none given:
every tensor) and whose dtype is a conversion source must appear in CONVERTED as
DTYPE with exactly the bits of torch's .to(DTYPE) of the original (NaN: NaN-ness
only, see below); every other tensor must be byte-identical. Names, shapes and __metadata__ must be kept.
Files are read by hand (the safetensors package is not installed): 8-byte
little-endian header size, JSON header, data section. Exit 0 when all agree,
1 with a line per difference otherwise."""
import fnmatch
import json
import struct
import sys

import torch

TORCH = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
CONVERTIBLE = {"F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2"}


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    return header, data[8 + n :]


INT_OF_WIDTH = {8: torch.int64, 4: torch.int32, 2: torch.int16}


def as_tensor(raw, dtype):
    if not raw:
        return torch.empty(0, dtype=TORCH[dtype])
    return torch.frombuffer(bytearray(raw), dtype=TORCH[dtype])


def int_view(t):
    return t.view(INT_OF_WIDTH[t.element_size()])


def tensor_bytes(header, body, name):
    begin, end = header[name]["data_offsets"]
    return body[begin:end]


def main():
    if len(sys.argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    src_path, dst_path, target = sys.argv[1], sys.argv[2], sys.argv[3]
    globs = [g for g in sys.argv[4].split(",") if g] if len(sys.argv) == 5 else []
    src_header, src_body = read(src_path)
    dst_header, dst_body = read(dst_path)
    problems = []
    if src_header.get("__metadata__") != dst_header.get("__metadata__"):
        problems.append("__metadata__ differs")
    names = sorted(k for k in src_header if k != "__metadata__")
    if names != sorted(k for k in dst_header if k != "__metadata__"):
        problems.append("the tensor names differ")
        names = [n for n in names if n in dst_header]
    converted = 0
    for name in names:
        src, dst = src_header[name], dst_header[name]
        raw = tensor_bytes(src_header, src_body, name)
        matched = not globs or any(fnmatch.fnmatchcase(name, g) for g in globs)
        if src["shape"] != dst["shape"]:
            problems.append(f"{name}: shape {dst['shape']} != {src['shape']}")
            continue
        if matched and src["dtype"] in CONVERTIBLE and src["dtype"] != target:
            converted += 1
            if dst["dtype"] != target:
                problems.append(f"{name}: dtype {dst['dtype']}, expected {target}")
                continue
            got_raw = tensor_bytes(dst_header, dst_body, name)
            want = as_tensor(raw, src["dtype"]).to(TORCH[target])
            got = as_tensor(got_raw, target)
            if got.numel() != want.numel():
                problems.append(f"{name}: {got.numel()} elements, expected {want.numel()}")
                continue
            # NaN bits: torch 1.13's vectorised float->bf16 path writes 0xFFFF, its scalar
            # path 0x7FC0 (the lib follows the scalar rule), so for NaN only NaN-ness is
            # compared; every other value bit for bit.
            both_nan = torch.isnan(got.float()) & torch.isnan(want.float())
            bits_differ = int_view(got) != int_view(want)
            bad = (bits_differ & ~both_nan).nonzero().flatten()
            if len(bad) > 0:
                i = int(bad[0])
                problems.append(f"{name}: {len(bad)} values differ, first at {i}: "
                                f"{int_view(got)[i].item():#x} != {int_view(want)[i].item():#x}")
            continue
        else:
            if dst["dtype"] != src["dtype"]:
                problems.append(f"{name}: dtype changed to {dst['dtype']}")
                continue
            expected = raw
        got = tensor_bytes(dst_header, dst_body, name)
        if got != expected:
            diff = next((i for i in range(min(len(got), len(expected))) if got[i] != expected[i]), None)
            problems.append(f"{name}: bytes differ (lengths {len(got)}/{len(expected)}, first at {diff})")
    for p in problems:
        print(f"{dst_path}: {p}")
    print(f"{dst_path}: {len(names)} tensors checked, {converted} converted to {target}, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
