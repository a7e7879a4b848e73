#!/usr/bin/python3
"""Writes tests/unit/lib/sniff_samples/samples.inc: real files made by torch 1.13,
NumPy, pickle, zipfile, tarfile, gzip/bz2/lzma (and the zstd/lz4 tools when
installed) as C arrays, so the unit test of lib/sniff/ needs no Python.

Run with /usr/bin/python3 (it has torch and numpy). Pickles that name a callable
use harmless builtins, and every "this is a pickle" sample made by hand is
loaded here with pickle.loads to prove that Python really unpickles it (or runs
its payload before failing)."""
import bz2
import gzip
import io
import lzma
import os
import pickle
import shutil
import subprocess
import tarfile
import tempfile
import zipfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "sniff_samples", "samples.inc")

samples = []  # (C name, bytes, comment)


def add(name, data, comment):
    samples.append((name, bytes(data), comment))


def torch_bytes(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf, **kw)
    return buf.getvalue()


def zip_bytes(members, compression=zipfile.ZIP_STORED):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.compress_type = compression
            z.writestr(info, data)
    return buf.getvalue()


def must_load(data, expect_error=False):
    """pickle.loads must accept it (or run it and then fail, for broken tails)."""
    try:
        pickle.loads(data)
    except Exception:
        if not expect_error:
            raise
        return
    if expect_error:
        raise AssertionError("expected the stream to break after its payload")


tensor = {"w": torch.arange(4, dtype=torch.float32)}
add("torch_zip", torch_bytes(tensor), "torch.save (zip format) of {'w': arange(4)}")
add("torch_legacy", torch_bytes(tensor, _use_new_zipfile_serialization=False),
    "torch.save(_use_new_zipfile_serialization=False)")

# Pickles of every protocol; the object holds a bytes value so protocols 0-2 name
# _codecs.encode (a GLOBAL + REDUCE), 3+ use binary opcodes only.
obj = {"a": [1, 2.5, "x", b"y", None, True]}
for proto in range(6):
    add("pickle_p%d" % proto, pickle.dumps(obj, protocol=proto), "pickle.dumps protocol %d" % proto)
add("pickle_p0_data_only", pickle.dumps({"a": [1, 2.5, "x"]}, protocol=0),
    "protocol 0 pickle of plain data (no GLOBAL): reaches STOP")

# Hand-made streams, each checked against the real unpickler.
mixed = b"cbuiltins\nstr\n\x8c\x02id\x85R."
must_load(mixed)
add("pickle_mixed_0_4", mixed, "GLOBAL (protocol 0) + SHORT_BINUNICODE (4) + TUPLE1 (2) + REDUCE")
breaks = b"cbuiltins\nstr\n(S'id'\ntR\xff\xfe garbage"
must_load(breaks, expect_error=True)
add("pickle_breaks_after_payload", breaks, "GLOBAL+REDUCE, then bytes that are no opcode")
stack_global = b"\x8c\x08builtins\x8c\x03str\x93\x8c\x02id\x85R."
must_load(stack_global)
add("pickle_stack_global_no_proto", stack_global, "protocol 4 opcodes without the PROTO header")
inst = b"(S'id'\nibuiltins\nstr\n."
must_load(inst)
add("pickle_inst", inst, "INST: imports and calls in one opcode")
hex_int = b"I0x10\n0cbuiltins\nstr\n(S'id'\ntR."
must_load(hex_int)
add("pickle_hex_int_first", hex_int, "INT written 0x10 (strtol base 0) before the payload")
deep = b"(" * 200 + b"cbuiltins\nstr\n(S'id'\ntR."
must_load(deep)
add("pickle_deep_marks", deep, "200 MARKs before the payload")
# Built again in C by the test (too large to embed): payloads pushed past 64 KiB.
must_load(b"N0" * 40000 + b"cbuiltins\nstr\n(S'id'\ntR.")
must_load(b"V" + b"a" * 70000 + b"\n0cbuiltins\nstr\n(S'id'\ntR.")
add("pickle_none_stop", b"N.", "the smallest pickle: NONE STOP")
must_load(b"N.")

# What a pickle would do (issue 23): pickles that name dangerous globals, made with
# pickle.dumps of an object whose __reduce__ names the callable. Never loaded here.
class Reduce:
    def __init__(self, func, args):
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)


import builtins  # noqa: E402
add("findings_os_system_p2", pickle.dumps(Reduce(os.system, ("echo hi",)), protocol=2),
    "os.system('echo hi') via GLOBAL + REDUCE, protocol 2 (posix.system)")
add("findings_exec_p4", pickle.dumps(Reduce(builtins.exec, ("print(1)",)), protocol=4),
    "builtins.exec via STACK_GLOBAL + REDUCE, protocol 4 (framed, memoized strings)")
add("findings_popen_p5", pickle.dumps(Reduce(subprocess.Popen, (["echo", "hi"],)), protocol=5),
    "subprocess.Popen via STACK_GLOBAL + REDUCE, protocol 5")
add("findings_torch_state_dict", torch_bytes(torch.nn.Linear(2, 2).state_dict()),
    "torch.save of nn.Linear(2, 2).state_dict(): benign tensor rebuilding only")
add("findings_torch_zip_system", torch_bytes([Reduce(os.system, ("echo hi",))]),
    "torch.save of a list holding an os.system reduction: data.pkl calls posix.system")
buf = io.BytesIO(); np.save(buf, np.array([Reduce(os.system, ("echo hi",))], dtype=object), allow_pickle=True)
add("findings_npy_system", buf.getvalue(), "np.save of an object array whose item reduces to os.system")
add("text_nb_model_card", b"N.B. this model card starts with a note.\n\nIt is text.\n",
    "a model card starting 'N.B.': NONE STOP, a data-only pickle, so text")

# NumPy.
buf = io.BytesIO(); np.save(buf, np.arange(3, dtype=np.int64)); add("npy_int64", buf.getvalue(), "np.save int64")
buf = io.BytesIO(); np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
add("npy_object", buf.getvalue(), "np.save of an object array: pickle after the header")
buf = io.BytesIO(); np.savez(buf, a=np.arange(3), b=np.ones(2)); add("npz", buf.getvalue(), "np.savez")
buf = io.BytesIO(); np.savez_compressed(buf, a=np.arange(3)); add("npz_compressed", buf.getvalue(), "np.savez_compressed (deflated members)")

# Zips.
p0_payload = b"cbuiltins\nstr\n(S'id'\ntR."
add("zip_p0_member_renamed", zip_bytes([("model/weights.bin", p0_payload), ("model/readme.txt", b"hello\n")]),
    "stored member with an innocent name holding a protocol-0 pickle")
add("zip_text_only", zip_bytes([("a.txt", b"hello world\n"), ("b/c.json", b'{"x": 1}\n')]), "plain zip of text files")
add("zip_deflated_text", zip_bytes([("notes.txt", b"hello world\n" * 50)], zipfile.ZIP_DEFLATED), "deflated zip")
add("zip_empty", zip_bytes([]), "empty zip: end-of-central-directory only")

# Keep the tars small: pad to 1 KiB records instead of 10 KiB (still valid tar).
tarfile.RECORDSIZE = 1024

# Legacy tar checkpoint layout (torch < 0.4 wrote sys_info, pickle, storages, tensors).
tbuf = io.BytesIO()
with tarfile.open(fileobj=tbuf, mode="w", format=tarfile.PAX_FORMAT) as tar:
    for name, data in [("sys_info", pickle.dumps({"little_endian": True}, protocol=2)),
                       ("pickle", pickle.dumps(obj, protocol=2)),
                       ("storages", pickle.dumps(0, protocol=2)),
                       ("tensors", pickle.dumps(0, protocol=2))]:
        info = tarfile.TarInfo(name); info.size = len(data); info.mtime = 0
        tar.addfile(info, io.BytesIO(data))
add("tar_torch_legacy", tbuf.getvalue(), "tar with torch's legacy members")
tbuf = io.BytesIO()
with tarfile.open(fileobj=tbuf, mode="w", format=tarfile.GNU_FORMAT) as tar:
    data = b"just a text file\n"
    info = tarfile.TarInfo("docs/readme.txt"); info.size = len(data); info.mtime = 0
    tar.addfile(info, io.BytesIO(data))
add("tar_plain", tbuf.getvalue(), "GNU tar of one text file")

# ONNX (torch.onnx.export needs no onnx package).
with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "m.onnx")
    torch.onnx.export(torch.nn.Linear(2, 1), torch.zeros(1, 2), path)
    add("onnx_linear", open(path, "rb").read(), "torch.onnx.export of nn.Linear(2, 1)")

# Compressed checkpoints.
raw = samples[0][1]
add("gzip_torch", gzip.compress(raw, mtime=0), "gzip of the torch zip")
add("bz2_torch", bz2.compress(raw), "bzip2 of the torch zip")
add("xz_torch", lzma.compress(raw), "xz of the torch zip")
import zlib
add("zlib_torch", zlib.compress(raw), "zlib stream of the torch zip")
for tool, args, name in [("zstd", ["-q", "-c"], "zstd_torch"), ("lz4", ["-q", "-c"], "lz4_torch")]:
    if shutil.which(tool):
        add(name, subprocess.run([tool] + args, input=raw, stdout=subprocess.PIPE, check=True).stdout,
            "%s of the torch zip" % tool)

# Seeds for the fuzz target: every sample up to 4 KiB, plus a few texts and crafted heads.
SEEDS = os.path.join(HERE, "..", "..", "fuzz", "corpus", "fuzz_sniff")
os.makedirs(SEEDS, exist_ok=True)
extra_seeds = [
    ("text_readme", b"---\nlicense: mit\n---\n# Model card\n\nThis model. N.B. see below.\n"),
    ("text_merges", "#version: 0.2\n\u0120 t\nh e\ni n\n".encode()),
    ("json_config", b'{"architectures": ["LlamaForCausalLM"], "hidden_size": 64}\n'),
    ("pickle_os_system_p0", b"cos\nsystem\n(S'echo hi'\ntR."),
    ("zip_with_prefix", b"junk prefix 0123456789" + samples[0][1]),
    ("gguf", b"GGUF\x03\x00\x00\x00" + bytes(16)),
    ("hdf5_user_block", bytes(512) + b"\x89HDF\r\n\x1a\n" + bytes(32)),
    ("tflite", b"\x1c\x00\x00\x00TFL3" + bytes(40)),
    ("seven_z", b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(24)),
    ("safetensors_like", b"\x10\x00\x00\x00\x00\x00\x00\x00{\"__metadata__\":{}}"),
]
for name, data in [(n, d) for n, d, _ in samples if len(d) <= 4096] + extra_seeds:
    with open(os.path.join(SEEDS, name), "wb") as f:
        f.write(data)

with open(OUT, "w") as f:
    f.write("/* Generated by tests/unit/lib/gen_sniff_samples.py (torch %s, numpy %s); do not edit. */\n"
            % (torch.__version__, np.__version__))
    for name, data, comment in samples:
        f.write("\n/* %s (%d bytes) */\nstatic const unsigned char sample_%s[] = {" % (comment, len(data), name))
        for i, b in enumerate(data):
            if i % 16 == 0:
                f.write("\n   ")
            f.write(" 0x%02x," % b)
        f.write("\n};\n")
    f.write("\n#define SNIFF_SAMPLES(X) \\\n")
    f.write(" \\\n".join("    X(%s)" % name for name, _, _ in samples))
    f.write("\n")
print("wrote %s: %d samples" % (OUT, len(samples)))
