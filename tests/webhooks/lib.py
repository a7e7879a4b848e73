#!/usr/bin/python3
"""Helpers of tests/webhooks/lib.sh: read a JSON answer or the receiver's records.

    lib.py get FILE KEY          a member of the JSON object in FILE
    lib.py jcount FILE EXPR      len(EXPR), J being FILE's JSON
    lib.py jexpr FILE EXPR       EXPR, J being FILE's JSON
    lib.py count LOG EXPR        len(EXPR), R being the receiver's records;
                                 ids(pred) is the set of ids of the records pred keeps
    lib.py safetensors PATH      writes a small valid .safetensors file
"""
import json
import struct
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def show(value):
    if isinstance(value, (list, dict)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def records(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except OSError:
        return []


what = sys.argv[1]
if what == "get":
    J = load(sys.argv[2])
    print(show(J.get(sys.argv[3]) if isinstance(J, dict) else None))
elif what == "jcount":
    J = load(sys.argv[2])
    print(len(eval(sys.argv[3])))
elif what == "jexpr":
    J = load(sys.argv[2])
    print(show(eval(sys.argv[3])))
elif what == "count":
    R = records(sys.argv[2])

    def ids(pred):
        return {r["id"] for r in R if pred(r)}

    print(len(eval(sys.argv[3])))
elif what == "safetensors":
    data = struct.pack("<8f", *range(8))
    header = json.dumps({"w": {"dtype": "F32", "shape": [2, 4], "data_offsets": [0, len(data)]}})
    header += " " * (-len(header) % 8)
    with open(sys.argv[2], "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header.encode() + data)
