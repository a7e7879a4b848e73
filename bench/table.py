#!/usr/bin/env python3
"""bench/table.py [RESULTS_JSON]: prints build/bench/results.json (written by
`make bench`) as the Markdown table docs/PERFORMANCE.md holds: figure, value,
anchor, anchor value, ratio."""
import json
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "build/bench/results.json"
with open(path) as f:
    rows = json.load(f)


def fmt(v):
    if v is None:
        return "-"
    if isinstance(v, float):
        return "%.0f" % v if abs(v) >= 1000 else "%.4g" % v
    return str(v)


print("| figure | value | unit | anchor | anchor value | ratio |")
print("|---|---|---|---|---|---|")
for r in rows:
    print("| %s | %s | %s | %s | %s | %s |" % (
        r.get("name", "").replace("|", "\\|"), fmt(r.get("value")), r.get("unit", ""),
        (r.get("anchor") or "").replace("|", "\\|"), fmt(r.get("anchor_value")),
        fmt(r.get("ratio"))))
