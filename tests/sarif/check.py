"""The checks of tests/sarif/run.sh (read its header): BINARY URL WORKDIR VALIDATOR.

Makes the inputs in WORKDIR, asks the server (urllib, real HTTP) and the CLI for the
JSON verdict and the SARIF report of each, validates every report with VALIDATOR
(node + ajv + the SARIF 2.1.0 schema) and compares each report with the JSON verdict
of the same input. Prints "sarif: N passed, N failed"; exits 1 on any failure."""
import collections
import hashlib
import json
import os
import pickle
import struct
import subprocess
import sys
import types
import urllib.error
import urllib.request

binary, url, work, validator = sys.argv[1:5]
passed = failed = 0


def check(name, cond, info=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}" + (f": {info}" if info else ""))


# ---- the inputs --------------------------------------------------------------------
class Reduce:
    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return (self.fn, self.args)


# a global in neither list of the gate: a function of a module no one ships
acme = types.ModuleType("acme_tools")


def helper(*_):
    return None


helper.__module__ = "acme_tools"
acme.helper = helper
sys.modules["acme_tools"] = acme

evil = pickle.dumps(
    [Reduce(os.system, ("echo pwned",)), Reduce(eval, ("1+1",)), collections.OrderedDict(a=1),
     Reduce(helper, (1,))], protocol=2)
header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
valid_st = struct.pack("<Q", len(header)) + header + b"\0" * 8
truncated_st = struct.pack("<Q", len(header)) + header + b"\0" * 4
# GGUF v3 with a key-value count far beyond any bound
bad_gguf = b"GGUF" + struct.pack("<IQQ", 3, 1, 1 << 60)
code = b"import os\nos.system('id')\n"

inputs = [  # name, bytes, server kind
    ("evil.pkl", evil, None),
    ("x.py", code, None),
    ("bad.gguf", bad_gguf, "sidecar"),
    ("bad.safetensors", truncated_st, None),
    ("ok.safetensors", valid_st, None),
]
os.makedirs(os.path.join(work, "in", "sub dir"), exist_ok=True)
for name, data, _ in inputs:
    with open(os.path.join(work, "in", name), "wb") as f:
        f.write(data)
with open(os.path.join(work, "in", "sub dir", "ok copy.safetensors"), "wb") as f:
    f.write(valid_st)

reports = {}  # report file -> (what it is, the JSON verdicts it must agree with)


def save(label, text):
    path = os.path.join(work, f"report{len(reports)}.sarif")
    with open(path, "w") as f:
        f.write(text)
    return path


def post(query, body, accept=None):
    req = urllib.request.Request(f"{url}/v1/scan{query}", data=body, method="POST")
    req.add_header("Content-Type", "application/octet-stream")
    if accept:
        req.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def query(name, kind, fmt=None):
    parts = []
    if name is not None:
        parts.append("name=" + urllib.request.quote(name, safe=""))
    if kind:
        parts.append("kind=" + kind)
    if fmt:
        parts.append("format=" + fmt)
    return "?" + "&".join(parts) if parts else ""


# ---- the server: ?format=sarif and Accept, against the JSON answer ------------------
for name, data, kind in inputs:
    status, _, body = post(query(name, kind), data)
    check(f"scan {name} json status", status == 200, f"{status} {body[:200]!r}")
    verdict = json.loads(body)
    status, headers, body = post(query(name, kind, "sarif"), data)
    check(f"scan {name} sarif status", status == 200, f"{status} {body[:200]!r}")
    check(f"scan {name} sarif content type",
          headers.get("Content-Type", "").startswith("application/sarif+json"),
          headers.get("Content-Type"))
    check(f"scan {name} sarif Vary", "Accept" in headers.get("Vary", ""), headers.get("Vary"))
    reports[save(name, body.decode())] = (f"scan?format=sarif {name}", [(name, verdict)])
    # the same through Accept
    status, headers, body = post(query(name, kind), data, accept="application/sarif+json")
    check(f"scan {name} Accept sarif", status == 200 and headers.get("Content-Type", "").startswith(
        "application/sarif+json"), f"{status} {headers.get('Content-Type')}")
    reports[save(name, body.decode())] = (f"scan Accept: sarif {name}", [(name, verdict)])

# no name: the placeholder uri
status, _, body = post("", evil)
unnamed = json.loads(body)
status, _, body = post("?format=sarif", evil)
reports[save("unnamed", body.decode())] = ("scan without name", [("unnamed", unnamed)])

# JSON stays the default, Accept that prefers JSON keeps it, an unknown format is 400
status, headers, body = post("", valid_st)
check("default is JSON", headers.get("Content-Type", "").startswith("application/json")
      and json.loads(body)["valid"] is True, headers.get("Content-Type"))
status, headers, body = post("", valid_st, accept="application/json, application/sarif+json;q=0.5")
check("Accept preferring JSON", headers.get("Content-Type", "").startswith("application/json"),
      headers.get("Content-Type"))
status, headers, body = post("?format=json", valid_st, accept="application/sarif+json")
check("format=json beats Accept", headers.get("Content-Type", "").startswith("application/json"),
      headers.get("Content-Type"))
status, headers, body = post("?format=xml", valid_st)
problem = json.loads(body) if body else {}
check("format=xml is 400 invalid_format",
      status == 400 and problem.get("reason") == "invalid_format"
      and headers.get("Content-Type", "").startswith("application/problem+json"),
      f"{status} {body[:200]!r}")


# ---- the CLI: scan --format sarif (the C client) and validate --format sarif --------
def cli(*args, cwd=None):
    p = subprocess.run([binary, *args], capture_output=True, text=True, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


for name, data, _ in inputs:
    path = os.path.join(work, "in", name)
    rc_json, out, err = cli("scan", path, "--json", "--url", url)
    verdict = json.loads(out)
    want_rc = 0 if verdict.get("valid") else 1
    check(f"cli scan {name} --json exit", rc_json == want_rc, f"{rc_json} {err}")
    rc, out, err = cli("scan", path, "--format", "sarif", "--url", url)
    check(f"cli scan {name} --format sarif exit", rc == want_rc, f"{rc} {err}")
    reports[save(name, out)] = (f"cli scan --format sarif {name}", [(name, verdict)])
    if name == "x.py":  # the base name went to the server: refused as code by its name
        check("cli scan x.py is code_python", verdict.get("reason") == "code_python", verdict)

names = [name for name, _, _ in inputs] + ["sub dir/ok copy.safetensors"]
rc, out, err = cli("validate", "--json", *names, cwd=os.path.join(work, "in"))
local = [json.loads(line) for line in out.splitlines()]
for v in local:
    with open(os.path.join(work, "in", v["file"]), "rb") as f:
        data = f.read()
    v["size"], v["sha256"] = len(data), hashlib.sha256(data).hexdigest()
rc, out, err = cli("validate", "--format", "sarif", *names, cwd=os.path.join(work, "in"))
check("validate --format sarif exit (refused files)", rc == 1, f"{rc} {err}")
reports[save("validate", out)] = (
    "validate --format sarif", [(v["file"].replace(" ", "%20"), v) for v in local])
# a file that cannot be read: the run says so (executionSuccessful false), exit 2
rc, out, err = cli("validate", "--format", "sarif", "ok.safetensors", "missing.safetensors",
                   cwd=os.path.join(work, "in"))
check("validate --format sarif unreadable exit", rc == 2, f"{rc} {err}")
unreadable = save("unreadable", out)
# usage errors: an unknown format, --json with --format sarif
for args in (["validate", "--format", "xml", "ok.safetensors"],
             ["validate", "--json", "--format", "sarif", "ok.safetensors"],
             ["scan", "ok.safetensors", "--format", "xml", "--url", url],
             ["scan", "ok.safetensors", "--json", "--format", "sarif", "--url", url]):
    rc, out, err = cli(*args, cwd=os.path.join(work, "in"))
    check(f"{' '.join(args[:4])}: usage error", rc == 2 and out == "", f"{rc} {out[:100]!r} {err}")

# ---- the validator over every report -------------------------------------------------
files = list(reports) + [unreadable]
p = subprocess.run(["node", validator, *files], capture_output=True, text=True)
summaries = {}
for line in p.stdout.splitlines():
    s = json.loads(line)
    summaries[s["file"]] = s
check("the validator ran", len(summaries) == len(files), p.stderr[-2000:])
for path in files:
    s = summaries.get(path, {"ok": False, "errors": ["no verdict"]})
    label = reports[path][0] if path in reports else "unreadable"
    check(f"{label}: valid SARIF 2.1.0", s["ok"], "; ".join(s["errors"][:5]))

u = summaries.get(unreadable, {})
check("unreadable: executionSuccessful false", u.get("executionSuccessful") is False, u)
check("unreadable: one notification, one artifact",
      u.get("notifications") == 1 and len(u.get("artifacts", [])) == 1, u)

LEVEL = {"dangerous": "error", "unknown": "warning", "benign": "note"}


def compare(label, s, expected):
    """s: the validator's summary of one report; expected: [(uri, JSON verdict)]."""
    if not s.get("ok"):
        return
    check(f"{label}: one run", s["runs"] == 1)
    check(f"{label}: tool", s["driver"]["name"] == "tensorgate" and s["driver"]["version"], s["driver"])
    check(f"{label}: executionSuccessful", s["executionSuccessful"] is True)
    check(f"{label}: one artifact per file", len(s["artifacts"]) == len(expected),
          f"{len(s['artifacts'])} != {len(expected)}")
    for index, (uri, v) in enumerate(expected):
        a = s["artifacts"][index] if index < len(s["artifacts"]) else {}
        check(f"{label} {uri}: artifact uri", a.get("uri") == uri, f"{a.get('uri')} != {uri}")
        check(f"{label} {uri}: artifact length", a.get("length") == v["size"], f"{a.get('length')} != {v['size']}")
        check(f"{label} {uri}: artifact sha-256", a.get("sha256") == v["sha256"], f"{a.get('sha256')} != {v['sha256']}")
        check(f"{label} {uri}: artifact format", a.get("format") == v["format"], f"{a.get('format')} != {v['format']}")
        mine = [r for r in s["results"] if r["uri"] == uri]
        if v["valid"]:
            check(f"{label} {uri}: admitted, no result", mine == [], mine)
            continue
        # a code refusal spans the whole file: byteOffset 0 where the JSON has no offset
        offset = v["offset"]
        if v["reason"].startswith("code_") and offset is None:
            offset = 0
        want = [("error", v["reason"], offset, v["detail"])]
        for f in v["findings"]:
            want.append((LEVEL[f["severity"]], "pickle_global_" + f["severity"], f["offset"], f["global"]))
        got = [(r["level"], r["ruleId"], r["byteOffset"],
                r["text"] if i == 0 else r["properties"].get("global")) for i, r in enumerate(mine)]
        check(f"{label} {uri}: results agree with the JSON verdict", got == want, f"{got} != {want}")
        if v["reason"].startswith("code_"):  # the whole file is the finding
            check(f"{label} {uri}: code spans the file",
                  mine[0]["byteOffset"] == 0 and mine[0]["byteLength"] == v["size"], mine[0])


for path, (label, expected) in reports.items():
    compare(label, summaries.get(path, {}), expected)

# what the pickle's report must hold, whatever the JSON said: several globals, each level
evil_report = next(p for p, (label, _) in reports.items() if label == "scan?format=sarif evil.pkl")
rules = [r["ruleId"] for r in summaries.get(evil_report, {}).get("results", [])]
check("pickle report: refused_format and every severity",
      rules[:1] == ["refused_format"] and {"pickle_global_dangerous", "pickle_global_unknown",
                                           "pickle_global_benign"} <= set(rules), rules)
check("pickle report: several globals", len(rules) >= 5, rules)

print(f"sarif: {len(files)} reports validated")
print(f"sarif: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
