#!/usr/bin/python3
"""Read a tensorgate host preload as NumPy arrays, with no copy.

    examples/host_numpy.py --socket DATA/preload.sock --token TOKEN --preload ID
        [--check FILE.safetensors] [--hold]

Connects to the preload hand-off socket, sends {"token","preload"} as one JSON
line, receives the layout line with the sealed memfd attached (SCM_RIGHTS),
maps it read-only and builds one array per tensor over the mapping. The open
socket is the lease: the server keeps the memory until this process closes it
(or dies). Use the arrays only while the socket is open: after the lease ends a
DELETE or an eviction truncates the memfd to 0 bytes (touching the mapping then
raises SIGBUS; docs/preload-handoff.md). --check compares every tensor with the original file's bytes;
--hold keeps the lease until stdin closes.
"""
import argparse
import json
import mmap
import socket
import struct
import sys

import numpy as np

# Safetensors dtypes NumPy can show directly; the others are shown as raw unsigned words.
NUMPY_DTYPES = {
    "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16, "U16": np.uint16,
    "F16": np.float16, "I32": np.int32, "U32": np.uint32, "F32": np.float32,
    "F64": np.float64, "I64": np.int64, "U64": np.uint64, "C64": np.complex64,
    "BF16": np.uint16, "F8_E4M3": np.uint8, "F8_E5M2": np.uint8,
}


def lease(socket_path, token, preload_id):
    """Returns (socket, fd, layout dict). Keep the socket open while the memory is used."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(socket_path)
    sock.sendall(json.dumps({"token": token, "preload": preload_id}).encode() + b"\n")
    data, fds = b"", []
    while not data.endswith(b"\n"):
        chunk, received, _flags, _addr = socket.recv_fds(sock, 1 << 20, 1)
        fds += received
        if not chunk:
            break
        data += chunk
    reply = json.loads(data)
    if "error" in reply:
        raise RuntimeError(f"{reply['error']}: {reply.get('detail')}")
    if not fds:
        raise RuntimeError("the server sent no file descriptor")
    return sock, fds[0], reply


def arrays(fd, layout):
    """One read-only NumPy array per tensor, over one shared mapping."""
    if not layout.get("mappable"):
        raise RuntimeError(f"{layout['device']} memory is not host-mappable (import the fd with CUDA)")
    memory = mmap.mmap(fd, layout["bytes"], flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    out = {}
    for t in layout["layout"]:
        dtype = NUMPY_DTYPES.get(t["dtype"], np.uint8)
        count = t["bytes"] // np.dtype(dtype).itemsize
        a = np.frombuffer(memory, dtype=dtype, count=count, offset=t["offset"])
        # Sub-byte dtypes (F4, F6) stay flat bytes; the rest take their shape.
        out[t["name"]] = a.reshape(t["shape"]) if count == int(np.prod(t["shape"])) else a
    return memory, out


def check(path, layout, tensors):
    """Compares each unconverted tensor with the file; returns the number that match."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    matched = 0
    for t in layout["layout"]:
        entry = header[t["name"]]
        begin, end = entry["data_offsets"]
        source = blob[8 + n + begin:8 + n + end]
        if entry["dtype"] != t["dtype"]:
            continue
        if tensors[t["name"]].tobytes() != source:
            print(f"mismatch {t['name']}")
            continue
        matched += 1
    return matched


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--socket", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--preload", required=True)
    parser.add_argument("--check")
    parser.add_argument("--hold", action="store_true")
    args = parser.parse_args()
    sock, fd, layout = lease(args.socket, args.token, args.preload)
    memory, tensors = arrays(fd, layout)
    for t in layout["layout"]:
        a = tensors[t["name"]]
        print(f"{t['name']}: {t['dtype']} {t['shape']} at {t['offset']} ({a.dtype}, {a.nbytes} bytes)")
    if args.check:
        print(f"ok {check(args.check, layout, tensors)} of {len(layout['layout'])}")
    sys.stdout.flush()
    if args.hold:
        sys.stdin.read()
    # The mapping lives as long as any array over it; the memfd stays valid for it
    # even after the lease ends, but the server may then free its own reference.
    del memory, tensors
    sock.close()  # ends the lease


if __name__ == "__main__":
    main()
