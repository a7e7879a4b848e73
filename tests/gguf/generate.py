#!/usr/bin/env python3
"""Writes the GGUF corpus (tests/gguf/run.sh): valid files and named malformed classes.

    generate.py OUTDIR

Writes OUTDIR/NAME.gguf for every case and OUTDIR/expected.tsv with one row per case:
NAME, the expected verdict (valid or the gate's reason code). Built with struct only,
from the GGUF specification (v2/v3, little-endian); no GGUF library is involved, so the
files are an independent statement of the format. Tensor bytes are 0x5a, never zero, so a
padding check that looked at the wrong bytes would show.
"""
import os
import struct
import sys

# ggml type id -> (elements per block, bytes per block), from the GGUF specification's
# enum and ggml's block layouts
GGML = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
    9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
    14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98),
    19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82), 23: (256, 136), 24: (1, 1),
    25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2), 34: (256, 54),
    35: (256, 66), 39: (32, 17),
}
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
       BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}


def s(text):
    b = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(b)) + b


def value(vtype, v):
    if vtype == STRING:
        return s(v)
    if vtype == ARRAY:
        etype, items = v
        return struct.pack("<IQ", etype, len(items)) + b"".join(value(etype, x) for x in items)
    return struct.pack(FMT[vtype], v)


def kv(key, vtype, v):
    return s(key) + struct.pack("<I", vtype) + value(vtype, v)


def nbytes(dims, gtype):
    block, size = GGML[gtype]
    n = dims[0] // block * size
    for d in dims[1:]:
        n *= d
    return n


def pad(n, a):
    return (n + a - 1) // a * a


ARCH = kv("general.architecture", STRING, "llama")


def gguf(tensors=(), kvs=None, version=3, align=32, magic=b"GGUF", n_tensors=None, n_kv=None,
         offsets=None, pad_last=True, header_pad=b"\0", data_pad=b"\0", end_pad=b"\0",
         trailing=b"", cut=0, raw_infos=None):
    """tensors: (name, dims, ggml type); kvs: raw key-values (ARCH by default)."""
    kvs = [ARCH] if kvs is None else list(kvs)
    if align != 32 and not any(k.startswith(s("general.alignment")) for k in kvs):
        kvs.append(kv("general.alignment", U32, align))
    infos = []
    sizes = []
    off = 0
    for i, (name, dims, gtype) in enumerate(tensors):
        size = nbytes(dims, gtype) if gtype in GGML and dims and 0 not in dims else 0
        size = size if size < (1 << 20) else 0  # an overflow case: no data written
        o = offsets[i] if offsets is not None else off
        infos.append(s(name) + struct.pack("<I", len(dims)) +
                     b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", gtype, o))
        sizes.append(size)
        off = pad(off + size, align)
    if raw_infos is not None:
        infos = raw_infos
    head = magic + struct.pack("<IQQ", version,
                               len(tensors) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv)
    head += b"".join(kvs) + b"".join(infos)
    out = bytearray(head)
    if tensors:
        out += (header_pad * align)[: pad(len(out), align) - len(out)]
    for i, size in enumerate(sizes):
        out += b"\x5a" * size
        last = i == len(sizes) - 1
        if last and not pad_last:
            break
        fill = end_pad if last else data_pad
        out += (fill * align)[: pad(size, align) - size]
    out += trailing
    if cut:
        out = out[:-cut]
    return bytes(out)


T1 = [("tok_embd.weight", [8, 4], 0)]
T2 = [("a", [8], 0), ("b", [3], 0)]
T3 = [("a", [8], 0), ("b", [3], 0), ("c", [5], 1)]


def cases():
    c = {}
    ok = c.setdefault
    # ---- valid ----
    ok("valid_v3_f32", ("valid", gguf(T1)))
    ok("valid_v2_f32", ("valid", gguf(T1, version=2)))
    ok("valid_zero_tensors", ("valid", gguf([])))
    ok("valid_align64", ("valid", gguf(T3, align=64)))
    ok("valid_align1", ("valid", gguf(T3, align=1)))
    ok("valid_last_unpadded", ("valid", gguf(T2, pad_last=False)))
    ok("valid_4d", ("valid", gguf([("x", [2, 3, 4, 5], 0)])))
    types = [(f"t{t}", [GGML[t][0] * 2, 3], t) for t in sorted(GGML)]
    ok("valid_all_types", ("valid", gguf(types)))
    tok = [
        kv("tokenizer.ggml.model", STRING, "gpt2"),
        kv("tokenizer.ggml.tokens", ARRAY, (STRING, ["a", "b", "\u00e9t\u00e9", ""])),
        kv("tokenizer.ggml.scores", ARRAY, (F32, [0.0, -1.5, 2.0, 3.0])),
        kv("tokenizer.ggml.token_type", ARRAY, (I32, [1, 1, 2, 3])),
        kv("llama.context_length", U32, 4096),
        kv("general.flag", BOOL, 1),
        kv("general.u8", U8, 7), kv("general.i8", I8, -7), kv("general.u16", U16, 7),
        kv("general.i16", I16, -7), kv("general.i32", I32, -7), kv("general.u64", U64, 7),
        kv("general.i64", I64, -7), kv("general.f64", F64, 0.5),
        kv("general.bools", ARRAY, (BOOL, [0, 1, 1])),
        kv("general.empty", ARRAY, (U8, [])),
    ]
    ok("valid_metadata", ("valid", gguf(T3, kvs=[ARCH] + tok)))
    # ---- header ----
    ok("bad_magic", ("refused_format", gguf(T1, magic=b"GGUf")))
    for v in (0, 1, 4, 0x03000000):
        ok(f"version_{v}", ("gguf_version", gguf(T1, version=v)))
    ok("n_tensors_huge", ("gguf_count", gguf(T1, n_tensors=1 << 63)))
    ok("n_kv_huge", ("gguf_count", gguf(T1, n_kv=(1 << 64) - 1)))
    ok("poc_n_tensors_alloc_overflow", ("gguf_count", gguf(T1, n_tensors=0x0800000000000001)))
    ok("n_kv_past_file", ("gguf_count", gguf([], n_kv=100)))
    ok("header_truncated", ("gguf_truncated", gguf([], kvs=[s("x" * 100)[:40]])))
    # ---- keys and values ----
    ok("key_length_huge", ("gguf_key", gguf(T1, kvs=[struct.pack("<Q", (1 << 64) - 1) + b"abc", ARCH])))
    ok("key_longer_than_spec", ("gguf_key", gguf(T1, kvs=[ARCH, kv("k" * 65536, U8, 1)])))
    ok("key_empty", ("gguf_key", gguf(T1, kvs=[ARCH, kv("", U8, 1)])))
    ok("key_not_ascii", ("gguf_key", gguf(T1, kvs=[ARCH, kv("general.n\u00e4me", U8, 1)])))
    ok("key_control", ("gguf_key", gguf(T1, kvs=[ARCH, kv("general\nname", U8, 1)])))
    ok("duplicate_key", ("gguf_duplicate_key", gguf(T1, kvs=[ARCH, kv("a.b", U8, 1), kv("a.b", U8, 2)])))
    ok("value_type_13", ("gguf_type", gguf(T1, kvs=[ARCH, s("a.b") + struct.pack("<IB", 13, 0)])))
    ok("value_type_huge", ("gguf_type", gguf(T1, kvs=[ARCH, s("a.b") + struct.pack("<IB", 0xFFFFFFFF, 0)])))
    ok("bool_2", ("gguf_bool", gguf(T1, kvs=[ARCH, s("a.b") + struct.pack("<IB", BOOL, 2)])))
    ok("array_bool_2", ("gguf_bool", gguf(T1, kvs=[ARCH, s("a.b") + struct.pack("<IIQBB", ARRAY, BOOL, 2, 1, 2)])))
    ok("array_type_unknown", ("gguf_array", gguf(T1, kvs=[ARCH, s("a.b") + struct.pack("<IIQ", ARRAY, 13, 0)])))
    ok("array_nested", ("gguf_array", gguf(T1, kvs=[ARCH, s("a.b") + struct.pack("<IIQ", ARRAY, ARRAY, 0)])))
    ok("poc_array_length_overflow", ("gguf_array", gguf(T1, kvs=[ARCH, s("a.b") + struct.pack("<IIQ", ARRAY, U64, 1 << 61)])))
    ok("array_length_past_file", ("gguf_array", gguf(T1, kvs=[ARCH, s("a.b") + struct.pack("<IIQ", ARRAY, U32, 100000)])))
    ok("array_strings_past_file", ("gguf_array", gguf(T1, kvs=[ARCH, s("a.b") + struct.pack("<IIQ", ARRAY, STRING, 1 << 40)])))
    ok("poc_string_length_huge", ("gguf_string", gguf(T1, kvs=[ARCH, s("a.b") + struct.pack("<IQ", STRING, (1 << 64) - 2)])))
    ok("string_past_file", ("gguf_string", gguf(T1, kvs=[ARCH, s("a.b") + struct.pack("<IQ", STRING, 4096) + b"xy"])))
    ok("string_not_utf8", ("gguf_utf8", gguf(T1, kvs=[ARCH, kv("a.b", STRING, b"ab\xff")])))
    ok("array_string_not_utf8", ("gguf_utf8", gguf(T1, kvs=[ARCH, kv("a.b", ARRAY, (STRING, [b"ok", b"\xc0\xaf"]))])))
    ok("architecture_missing", ("gguf_architecture", gguf(T1, kvs=[kv("general.name", STRING, "x")])))
    ok("architecture_not_string", ("gguf_architecture", gguf(T1, kvs=[kv("general.architecture", U32, 1)])))
    # ---- alignment ----
    for name, a in (("0", 0), ("3", 3), ("2p31", 1 << 31), ("131072", 1 << 17)):
        ok(f"alignment_{name}", ("gguf_alignment", gguf(T1, kvs=[ARCH, kv("general.alignment", U32, a)])))
    ok("alignment_wrong_type", ("gguf_alignment", gguf(T1, kvs=[ARCH, kv("general.alignment", U64, 32)])))
    # ---- tensor table ----
    ok("tensor_name_empty", ("gguf_tensor_name", gguf([("", [8], 0)])))
    ok("tensor_name_too_long", ("gguf_tensor_name", gguf([("n" * 64, [8], 0)])))
    ok("tensor_name_not_utf8", ("gguf_utf8", gguf([(b"bad\xfe", [8], 0)])))
    ok("duplicate_tensor", ("gguf_duplicate_tensor", gguf([("a", [8], 0), ("a", [8], 0)])))
    ok("dims_0", ("gguf_dims", gguf([("a", [], 0)])))
    ok("dims_5", ("gguf_dims", gguf([("a", [1, 1, 1, 1, 8], 0)])))
    ok("dim_zero", ("gguf_shape", gguf([("a", [8, 0], 0)])))
    ok("dim_negative", ("gguf_shape", gguf([("a", [8, 1 << 63], 0)])))
    ok("ggml_type_unknown", ("gguf_ggml_type", gguf([("a", [32], 99)])))
    # NVFP4 (40): known to @huggingface/gguf 0.4.6, not in the specification's table
    ok("ggml_type_not_in_spec", ("gguf_ggml_type", gguf([("a", [64], 40)])))
    ok("ggml_type_removed_q4_2", ("gguf_ggml_type", gguf([("a", [32], 4)])))
    ok("ggml_type_removed_q4_0_4_4", ("gguf_ggml_type", gguf([("a", [32], 31)])))
    ok("row_not_block_multiple", ("gguf_block", gguf([("a", [31, 2], 2)])))
    ok("elements_overflow", ("gguf_size_overflow", gguf([("a", [1 << 31, 1 << 31, 1 << 31], 24)])))
    ok("bytes_overflow", ("gguf_size_overflow", gguf([("a", [1 << 31, 1 << 31], 28)])))
    ok("dim_above_2p32", ("gguf_shape", gguf([("a", [(1 << 32) + 1], 24)])))
    ok("array_above_bound", ("gguf_array", gguf(T1, kvs=[ARCH, kv("a.b", ARRAY, (U8, [0] * 1000001))])))
    ok("string_above_bound", ("gguf_string", gguf(T1, kvs=[ARCH, kv("a.b", STRING, "x" * 10000001)])))
    ok("n_kv_above_bound", ("gguf_count", gguf([], n_kv=100001)))
    # ---- offsets and the data section ----
    ok("offset_unaligned", ("gguf_offset", gguf(T2, offsets=[1, 64])))
    ok("offset_overlap", ("gguf_overlap", gguf(T2, offsets=[0, 0])))
    ok("offsets_out_of_order", ("gguf_data_hole", gguf(T3, offsets=[0, 64, 32])))
    ok("offsets_backwards", ("gguf_overlap", gguf(T3, offsets=[0, 32, 0])))
    ok("offset_gap", ("gguf_data_hole", gguf(T2, offsets=[0, 64])))
    ok("offset_past_end", ("gguf_data_hole", gguf(T1, offsets=[1 << 40])))
    ok("offset_wrap", ("gguf_offset", gguf(T1, offsets=[(1 << 64) - 1])))
    ok("data_truncated", ("gguf_data_truncated", gguf(T1, pad_last=False, cut=10)))
    ok("data_missing", ("gguf_data_truncated", gguf(T1)[: -128]))
    ok("trailing_byte", ("gguf_trailing", gguf(T2, trailing=b"\0")))
    ok("trailing_block", ("gguf_trailing", gguf(T2, trailing=b"\0" * 32)))
    ok("trailing_zero_tensors", ("gguf_trailing", gguf([], trailing=b"\0" * 40)))
    ok("padding_header_nonzero", ("gguf_padding", gguf(T1, header_pad=b"\x01")))
    ok("padding_between_nonzero", ("gguf_padding", gguf([("a", [7], 0), ("b", [3], 0)], data_pad=b"\xff")))
    ok("padding_end_nonzero", ("gguf_padding", gguf(T2, end_pad=b"\x20")))
    return c


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: generate.py OUTDIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rows = []
    for name, (expect, data) in sorted(cases().items()):
        with open(os.path.join(out, name + ".gguf"), "wb") as f:
            f.write(data)
        rows.append(f"{name}\t{expect}\n")
    with open(os.path.join(out, "expected.tsv"), "w") as f:
        f.writelines(rows)


if __name__ == "__main__":
    main()
