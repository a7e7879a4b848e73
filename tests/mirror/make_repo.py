#!/usr/bin/env python3
"""tests/mirror/make_repo.py DIR: the upstream repository of the mirror suite, written
with the standard library alone: two safetensors shards and their index, a config,
a README, and (evil.bin) a pickle whose load would run a command."""
import json
import os
import pickle
import struct
import sys


def shard(path, tensors):
    header, data = {}, b""
    for name, values in tensors.items():
        raw = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": [len(values)],
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


class Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    shard(os.path.join(d, "model-00001-of-00002.safetensors"),
          {"a.weight": [float(i) for i in range(64)]})
    shard(os.path.join(d, "model-00002-of-00002.safetensors"),
          {"b.weight": [float(-i) for i in range(32)]})
    index = {"metadata": {"total_size": 64 * 4 + 32 * 4},
             "weight_map": {"a.weight": "model-00001-of-00002.safetensors",
                            "b.weight": "model-00002-of-00002.safetensors"}}
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model_type": "toy", "hidden_size": 64}, f)
    with open(os.path.join(d, "README.md"), "w") as f:
        f.write("---\nlicense: mit\n---\n# toy\n")
    with open(os.path.join(d, "evil.bin"), "wb") as f:
        f.write(pickle.dumps(Evil(), protocol=2))


if __name__ == "__main__":
    main()
