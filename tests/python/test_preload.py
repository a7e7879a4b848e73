"""Checks of tensorgate.preload (clients/python/tensorgate/preload.py) against a
real server this script starts (BINARY serve, a fresh data directory, the fake
CUDA backend for cuda:0): a host preload attached over the real hand-off socket,
every byte of every NumPy array and torch tensor compared with the original file
read here with plain struct/json; views read-only and lying in the shared memfd
mapping (no copy); close() refused while views live; a dropped Preload keeping
its lease until its last view is gone; DELETE while attached answering 202
evicting and completing after close; refusals (bad token, other namespace,
unknown preload, no socket) with no descriptor leaked; the CUDA import logic
through a substitute driver over the fake backend's memfd, and the real driver
failing clearly without libcuda; finally the server stopped under a lease:
check() says lease_lost and a child touching its view dies of SIGBUS with the
faulthandler's traceback. Last, a scripted peer in place of the server sends
malformed replies (not JSON, tensors outside the allocation or of the wrong byte
count, no or two descriptors, a short memfd, an endless line): each is a clear
PreloadError and no descriptor leaks.

usage: test_preload.py BINARY   (run by tests/python/run.sh; ends "N passed, N failed")"""

import gc
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import numpy as np
import torch

from tensorgate import TensorgateError
from tensorgate.preload import CudaDriver, PreloadError, PreloadInUse, attach

PASSED = 0
FAILED = 0


def check(name, cond, info=""):
    global PASSED, FAILED
    if cond:
        PASSED += 1
    else:
        FAILED += 1
        print(f"FAIL: {name} {info}")


def check_raises(name, fn, exc=TensorgateError, reason=None, contains=None):
    try:
        fn()
    except exc as e:
        ok = (reason is None or getattr(e, "reason", None) == reason) and (contains is None or contains in str(e))
        check(name, ok, f"got {type(e).__name__}: {e}")
        return e
    except Exception as e:  # noqa: BLE001
        check(name, False, f"raised {type(e).__name__}: {e}")
        return None
    check(name, False, "raised nothing")
    return None


# ---------------------------------------------------------------- the server


class Server:
    def __init__(self, binary, root):
        self.binary, self.data = binary, os.path.join(root, "data")
        self.log = open(os.path.join(root, "server.log"), "w+")
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--data", self.data, "--preload-fake-devices", "1"],
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )
        self.socket = os.path.join(self.data, "preload.sock")
        port = None
        for _ in range(200):
            self.log.seek(0)
            for line in self.log:
                if "listening on" in line:
                    port = line.split("listening on", 1)[1].split()[0].rsplit(":", 1)[1]
            if port and os.path.exists(self.socket):
                break
            time.sleep(0.05)
        if not port:
            raise RuntimeError("the server did not start")
        self.base = f"http://127.0.0.1:{port}"

    def token(self, scope, namespace):
        out = subprocess.run(
            [self.binary, "token", "create", "--data", self.data, "--scope", scope, "--namespace", namespace],
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout.strip().splitlines()[-1]

    def http(self, method, path, token=None, body=None):
        req = urllib.request.Request(self.base + path, data=body, method=method)
        if token:
            req.add_header("Authorization", "Bearer " + token)
        if body is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req) as r:
                data = r.read()
                return r.status, json.loads(data) if data else None
        except urllib.error.HTTPError as e:
            data = e.read()
            return e.code, json.loads(data) if data else None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)


def st_file(tensors):
    """safetensors bytes of [(name, dtype, shape, bytes)], data in list order."""
    header, off = {}, 0
    for name, dtype, shape, b in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(t[3] for t in tensors)


def read_reference(path):
    """{name: (dtype, shape, bytes)} of a safetensors file, read with struct/json only."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    out = {}
    for name, e in header.items():
        if name != "__metadata__":
            b, end = e["data_offsets"]
            out[name] = (e["dtype"], tuple(e["shape"]), blob[8 + n + b : 8 + n + end])
    return out


def publish(srv, token, model, data):
    srv.http("POST", "/v1/models", token, json.dumps({"name": model}).encode())
    _, v = srv.http("POST", f"/v1/models/{model}/versions", token, b"")
    v = v["version"]
    req = urllib.request.Request(
        f"{srv.base}/v1/models/{model}/versions/{v}/files/model.safetensors", data=data, method="PUT"
    )
    req.add_header("Authorization", "Bearer " + token)
    urllib.request.urlopen(req).read()
    srv.http("POST", f"/v1/models/{model}/versions/{v}/publish", token, b"")


def preload(srv, token, body):
    status, r = srv.http("POST", "/v1/preloads", token, json.dumps(body).encode())
    if status != 202:
        raise RuntimeError(f"POST /v1/preloads: {status} {r}")
    for _ in range(500):
        _, g = srv.http("GET", f"/v1/preloads/{r['id']}")
        if g and g.get("state") == "resident":
            return r["id"]
        time.sleep(0.02)
    raise RuntimeError(f"preload {r['id']} never became resident")


def leases(srv, pid, want):
    """Polls GET /v1/preloads/{id} until it shows `want` leases (or "gone"): the
    server sees a closed socket a little after the close."""
    for _ in range(500):
        status, g = srv.http("GET", f"/v1/preloads/{pid}")
        got = "gone" if status == 404 else g.get("leases")
        if got == want:
            return True
        time.sleep(0.02)
    return False


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def torch_bytes(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def smaps_entry(address):
    """(permissions, path) of the mapping of this process that holds address."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= address < hi:
                return parts[1], parts[5].strip() if len(parts) > 5 else ""
    return None, None


# ---------------------------------------------------------------- the fake CUDA driver


class HostView:
    """A host address in the NumPy array interface, keeping view (the lease's
    token) alive as long as the array made from it."""

    def __init__(self, view, host):
        cai = view.__cuda_array_interface__
        self.view = view
        self.__array_interface__ = {"version": 3, "shape": cai["shape"], "typestr": cai["typestr"],
                                    "data": (host, True)}


class FakeDriver:
    """CudaDriver's calls over the fake backend's memfd: import maps the fd
    read-only, "device addresses" are symbolic ranges that as_tensor resolves to
    the mapping; every call is recorded. fail_on: the call to refuse."""

    def __init__(self, fail_on=None):
        self.calls, self.fail_on = [], fail_on
        self.handles, self.ranges, self.next = {}, {}, 0x7F0000000000

    def _record(self, *call):
        self.calls.append(call)
        if call[0] == self.fail_on:
            raise PreloadError("cuda_error", f"{call[0]}: CUDA_ERROR_OUT_OF_MEMORY (fake)")

    def make_current(self, ordinal):
        self.calls.append(("make_current", ordinal))

    def granularity(self, ordinal):
        self._record("granularity", ordinal)
        return 2 << 20

    def import_handle(self, fd):
        self._record("import_handle")
        import mmap

        memory = mmap.mmap(fd, os.fstat(fd).st_size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        handle = len(self.handles) + 1
        self.handles[handle] = memory
        return handle

    def reserve(self, size):
        self._record("reserve", size)
        base, self.next = self.next, self.next + (1 << 40)
        self.ranges[base] = [size, None]
        return base

    def map(self, address, size, handle):
        self._record("map", size)
        self.ranges[address][1] = self.handles[handle]

    def set_read_only(self, address, size, ordinal):
        self._record("set_read_only", size, ordinal)

    def release(self, handle):
        self._record("release")
        memory = self.handles.pop(handle)
        if all(m is not memory for _size, m in self.ranges.values()):
            memory.close()

    def unmap(self, address, size):
        self._record("unmap", size)
        self.ranges[address][1].close()
        self.ranges[address][1] = None

    def free(self, address, size):
        self._record("free", size)
        del self.ranges[address]

    def as_tensor(self, view, device):
        self.calls.append(("as_tensor", device))
        cai = view.__cuda_array_interface__
        address = cai["data"][0]
        if not all(cai["shape"]):
            return torch.from_numpy(np.empty(cai["shape"], cai["typestr"]))
        for base, (size, memory) in self.ranges.items():
            if base <= address < base + size and memory is not None:
                host = np.frombuffer(memory, np.uint8).ctypes.data + (address - base)
                break
        else:
            raise AssertionError("as_tensor outside every mapped range")

        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.from_numpy(np.asarray(HostView(view, host)))


# ---------------------------------------------------------------- the checks

TORCH_ONLY = {"BF16"}
F8_IN_TORCH = hasattr(torch, "float8_e4m3fn")


def host_checks(srv, read, other, write, pid, ref):
    fds_before = open_fds()
    p = attach(srv.socket, pid, read)
    check("layout: every tensor", sorted(p.keys()) == sorted(ref), f"{p.keys()}")
    check("layout: offset order", [p.info(k).offset for k in p.keys()] == sorted(p.info(k).offset for k in p.keys()))
    check("device host", p.device == "host" and p.bytes > 0, f"{p.device} {p.bytes}")
    base = np.frombuffer(p._lease.memory, np.uint8).ctypes.data
    matched = 0
    for name, (dtype, shape, data) in ref.items():
        info = p.info(name)
        if dtype == "F8_E4M3":
            check_raises("numpy F8 refused", lambda: p.numpy(name), TypeError, contains="raw=True")
            a = p.numpy(name, raw=True)
            check("numpy raw F8: its bytes as uint8", a.dtype == np.uint8 and a.shape == shape and a.tobytes() == data)
            if F8_IN_TORCH:
                check("torch F8", torch_bytes(p.torch(name)) == data)
            else:
                check_raises("torch without float8: TypeError", lambda: p.torch(name), TypeError, contains="F8_E4M3")
            matched += 1
            del a
            continue
        if dtype in TORCH_ONLY:
            check_raises(f"numpy {dtype} refused", lambda: p.numpy(name), TypeError, contains="raw=True")
            a = p.numpy(name, raw=True)
            check(f"numpy raw {dtype} is uint16", a.dtype == np.uint16 and a.shape == shape, f"{a.dtype} {a.shape}")
        else:
            a = p.numpy(name)
            check(f"numpy {name} shape", a.shape == shape, f"{a.shape} {shape}")
        t = p.torch(name)
        check(f"torch {name} shape", tuple(t.shape) == shape, f"{tuple(t.shape)}")
        same = a.tobytes() == data and torch_bytes(t) == data
        check(f"bytes of {name}", same)
        matched += same
        if info.bytes:
            check(f"numpy {name} read-only", not a.flags.writeable)
            check_raises(f"numpy {name} write raises", lambda arr=a: arr.__setitem__(..., 0), ValueError)
            check_raises(f"numpy {name} writeable=True refused", lambda arr=a: arr.setflags(write=True), ValueError)
            # no copy: both point into the one mapping of the memfd, shared and read-only
            inside = base + info.offset == a.ctypes.data == t.data_ptr()
            check(f"{name} views the mapping", inside, f"{a.ctypes.data:#x} {t.data_ptr():#x} {base + info.offset:#x}")
            perms, path = smaps_entry(a.ctypes.data)
            check(f"{name} mapping is a shared read-only memfd", perms == "r--s" and "memfd:" in path,
                  f"{perms} {path}")
        del a, t
    check("every tensor equal to the file", matched == len(ref), f"{matched} of {len(ref)}")
    check("BF16 as torch.bfloat16", p.torch("bf16").dtype == torch.bfloat16)
    gc.collect()
    check("no view left", p.views == 0, f"{p.views}")

    # close() refused while a view (or something derived from it) lives
    w = p.numpy("w")
    row = w[3]
    del w
    t = p.torch("w")[1:, :2].t()
    check("views counted", p.views == 2, f"{p.views}")
    check_raises("close refused with views", p.close, PreloadInUse, reason="preload_in_use", contains="2 ")
    check("still leased after refusal", leases(srv, pid, 1))
    check("views still readable", row.tobytes() == ref["w"][2][3 * 64 * 4 : 4 * 64 * 4])
    del row
    check_raises("close refused with a torch view", p.close, PreloadInUse)
    del t
    p.close()
    check("closed", p.closed and p.fd == -1)
    p.close()  # twice: nothing
    check_raises("numpy after close", lambda: p.numpy("w"), PreloadError, reason="lease_ended")
    check("lease ended", leases(srv, pid, 0))
    check("no descriptor leaked", open_fds() == fds_before, f"{open_fds()} vs {fds_before}")

    # a dropped Preload keeps its lease while a view lives
    p = attach(srv.socket, pid, read)
    keep = p.torch("f16")
    del p
    gc.collect()
    check("dropped preload still leased", leases(srv, pid, 1))
    check("its view still right", torch_bytes(keep) == ref["f16"][2])
    del keep
    check("the last view ends the lease", leases(srv, pid, 0))
    # an exception leaving the with-block does not mask itself, the lease waits for the view
    try:
        with attach(srv.socket, pid, read) as p:
            keep = p.numpy("emb")
            raise KeyError("boom")
    except KeyError:
        pass
    check("with + exception: leased while the view lives", leases(srv, pid, 1))
    del keep, p
    check("with + exception: then ended", leases(srv, pid, 0))
    with attach(srv.socket, pid, read) as p:
        check("with: value", int(p.numpy("emb")[3]) == struct.unpack("<q", ref["emb"][2][24:32])[0])
    check("with: closed at the end", p.closed)
    check("no descriptor leaked (2)", open_fds() == fds_before, f"{open_fds()} vs {fds_before}")

    # refusals
    check_raises("bad token", lambda: attach(srv.socket, pid, "tg_bogus"), PreloadError, reason="unauthorized")
    check_raises("other namespace", lambda: attach(srv.socket, pid, other), PreloadError, reason="forbidden")
    check_raises("no token", lambda: attach(srv.socket, pid, ""), PreloadError, reason="unauthorized")
    check_raises("unknown preload", lambda: attach(srv.socket, "0123456789abcdef", read), PreloadError,
                 reason="preload_not_found")
    check_raises("no socket", lambda: attach(srv.socket + ".none", pid, read), PreloadError,
                 reason="connection_failed")
    check_raises("unknown tensor", lambda: attach(srv.socket, pid, read).numpy("nope"), KeyError)
    gc.collect()
    check("no descriptor leaked by refusals", open_fds() == fds_before, f"{open_fds()} vs {fds_before}")
    check("no lease left by refusals", leases(srv, pid, 0))

    # DELETE while attached: 202 evicting; the memory stays right; gone after close
    p = attach(srv.socket, pid, read)
    status, r = srv.http("DELETE", f"/v1/preloads/{pid}", write)
    check("DELETE while leased: 202 evicting", status == 202 and r.get("state") == "evicting", f"{status} {r}")
    p.check()
    a = p.numpy("w")
    check("bytes still right while evicting", a.tobytes() == ref["w"][2])
    status, r = srv.http("GET", f"/v1/preloads/{pid}")
    check("evicting, 1 lease", r.get("state") == "evicting" and r.get("leases") == 1, f"{r}")
    del a
    p.close()
    check("eviction completes after close", leases(srv, pid, "gone"))


def torch_write_dies(srv, read, pid):
    """A write into a host preload tensor: the child dies of SIGSEGV with the
    faulthandler's traceback, and the shared memory is unchanged."""
    code = (
        "import sys\nfrom tensorgate.preload import attach\n"
        "p = attach(sys.argv[1], sys.argv[2], sys.argv[3])\n"
        "t = p.torch('w')\nprint('attached', flush=True)\nt.fill_(1.0)\nprint('wrote')\n"
    )
    r = subprocess.run([sys.executable, "-c", code, srv.socket, pid, read], capture_output=True, text=True,
                       timeout=120)
    check("torch write: SIGSEGV", r.returncode == -signal.SIGSEGV and "attached" in r.stdout
          and "wrote" not in r.stdout, f"rc {r.returncode} {r.stdout} {r.stderr[-300:]}")
    check("torch write: traceback", "Segmentation fault" in r.stderr and "<string>" in r.stderr, r.stderr[-600:])


def no_stderr_attach(srv, read, pid):
    """attach where sys.stderr has no descriptor (a notebook's stream): faulthandler
    cannot be enabled, the attach works all the same."""
    code = (
        "import io, sys\nsys.stderr = io.StringIO()\nfrom tensorgate.preload import attach\n"
        "with attach(sys.argv[1], sys.argv[2], sys.argv[3]) as p:\n"
        "    print('shape', p.numpy('w').shape)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, srv.socket, pid, read], capture_output=True, text=True,
                       timeout=120)
    check("attach without a usable stderr", r.returncode == 0 and "shape (64, 64)" in r.stdout,
          f"rc {r.returncode} {r.stdout} {r.stderr[-300:]}")


def cuda_checks(srv, read, write, ref):
    fds_before = open_fds()
    cid = preload(srv, write, {"model": "acme/pre", "device": "cuda:0"})
    # the real driver: no libcuda here (or, on a GPU host, no CUDA import of a fake memfd)
    e = check_raises("real driver refuses", lambda: attach(srv.socket, cid, read), PreloadError)
    if e is not None and not os.path.exists("/dev/nvidia0"):
        check("real driver: clear error", e.reason == "cuda_unavailable" and "libcuda.so.1" in str(e), str(e))
    check("real driver: lease released", leases(srv, cid, 0))
    check_raises("CudaDriver without libcuda", lambda: CudaDriver("libcuda-none.so.1"), PreloadError,
                 reason="cuda_unavailable", contains="libcuda-none.so.1")

    drv = FakeDriver()
    p = attach(srv.socket, cid, read, cuda_driver=drv)
    mapped = p.reply["mapped_bytes"]
    names = [c[0] for c in drv.calls if c[0] not in ("make_current", "as_tensor")]
    check("cuda: import, reserve, map, set read-only, release", names ==
          ["import_handle", "reserve", "map", "set_read_only", "release"], f"{drv.calls}")
    check("cuda: maps mapped_bytes", ("reserve", mapped) in drv.calls, f"{drv.calls} {mapped}")
    check("cuda: the fd closed after import", p.fd == -1)
    matched = 0
    for name, (dtype, shape, data) in ref.items():
        if dtype == "F8_E4M3" and not F8_IN_TORCH:
            check_raises("cuda: torch without float8: TypeError", lambda: p.torch(name), TypeError)
            matched += 1
            continue
        t = p.torch(name)
        ok = tuple(t.shape) == shape and torch_bytes(t) == data
        matched += ok
        check(f"cuda {name}", ok, f"{tuple(t.shape)} {shape}")
    check("cuda: every tensor equal to the file", matched == len(ref))
    check("cuda: BF16 bit-cast", p.torch("bf16").dtype == torch.bfloat16)
    check_raises("cuda: numpy refused", lambda: p.numpy("w"), TypeError, contains=".torch")
    keep = p.torch("w")
    check_raises("cuda: close refused with a tensor", p.close, PreloadInUse)
    del keep
    p.close()
    last = [c[0] for c in drv.calls[-3:] if c[0] not in ("make_current", "as_tensor")]
    check("cuda: unmap and free at close", last == ["unmap", "free"], f"{drv.calls[-3:]}")
    check("cuda: lease ended", leases(srv, cid, 0))
    # another numbering of the GPUs in this process (CUDA_VISIBLE_DEVICES)
    drv = FakeDriver()
    with attach(srv.socket, cid, read, cuda_driver=drv, cuda_device=3) as p:
        check("cuda_device: bytes", torch_bytes(p.torch("w")) == ref["w"][2])
    calls = drv.calls
    check("cuda_device: ordinal 3 everywhere", ("make_current", 3) in calls and ("as_tensor", "cuda:3") in calls
          and ("set_read_only", mapped, 3) in calls and ("make_current", 0) not in calls, f"{calls}")
    # a failing driver call undoes what was done and ends the lease
    for fail in ("map", "set_read_only", "reserve"):
        drv = FakeDriver(fail_on=fail)
        check_raises(f"cuda: {fail} fails", lambda: attach(srv.socket, cid, read, cuda_driver=drv), PreloadError,
                     reason="cuda_error", contains=fail)
        done = [c[0] for c in drv.calls if c[0] != "make_current"]
        undo = {"map": ["free", "release"], "set_read_only": ["unmap", "free", "release"], "reserve": ["release"]}
        check(f"cuda: {fail} undone", done[-len(undo[fail]):] == undo[fail] and not drv.ranges, f"{done}")
        check(f"cuda: {fail} lease released", leases(srv, cid, 0))
    gc.collect()
    check("cuda: no descriptor leaked", open_fds() == fds_before, f"{open_fds()} vs {fds_before}")


def server_stop_checks(srv, read, pid):
    """The server stopping under a lease: check() says lease_lost; a child that
    touches its view then dies of SIGBUS, with a traceback (faulthandler)."""
    code = (
        "import sys\nfrom tensorgate.preload import attach\n"
        "p = attach(sys.argv[1], sys.argv[2], sys.argv[3])\n"
        "a = p.numpy('w')\nprint('attached', float(a[0, 0]), flush=True)\nsys.stdin.readline()\n"
        "print('sum', float(a.sum()), flush=True)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code, srv.socket, pid, read], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = child.stdout.readline()
    p = attach(srv.socket, pid, read)
    p.check()
    check("server stop: child attached", first.startswith("attached"), first)
    srv.stop()
    check_raises("server stop: lease_lost", p.check, PreloadError, reason="lease_lost")
    p.close()
    out, err = child.communicate("go\n", timeout=60)
    check("server stop: the child's touch is SIGBUS", child.returncode == -signal.SIGBUS and "sum" not in out,
          f"rc {child.returncode} {out} {err[-300:]}")
    check("server stop: with a traceback", "Bus error" in err and "<string>" in err, err[-300:])


def hostile_checks(root):
    """A scripted peer on a unix socket in place of the server: every malformed
    reply is a PreloadError naming it, and no descriptor is leaked."""
    import socket
    import threading

    before = open_fds()
    path = os.path.join(root, "hostile.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)

    def memfd(size, fill=b"\x01"):
        fd = os.memfd_create("hostile")
        os.ftruncate(fd, size)
        os.pwrite(fd, fill * size, 0)
        return fd

    def serve(reply, fds=(), trickle=False, hang_up=False):
        conn, _ = listener.accept()
        try:
            conn.recv(65536)
            if trickle:  # an endless line: the client stops at its bound
                chunk = b"x" * (1 << 20)
                try:
                    while True:
                        conn.sendall(chunk)
                except OSError:
                    pass
            elif fds:
                socket.send_fds(conn, [reply], list(fds))
            else:
                conn.sendall(reply)
            if not hang_up:
                conn.recv(1)  # until the client closes
        except OSError:
            pass
        finally:
            for fd in fds:
                os.close(fd)
            conn.close()

    def attempt(name, reply, fds=(), reason="protocol_error", contains=None, trickle=False, hang_up=False):
        t = threading.Thread(target=serve, args=(reply, fds, trickle, hang_up))
        t.start()
        e = check_raises(name, lambda: attach(path, "0123456789abcdef", "tok"), PreloadError, reason=reason,
                         contains=contains)
        t.join(30)
        return e

    def layout(entries, total=4096, device="host"):
        return (json.dumps({"preload": "0123456789abcdef", "device": device, "backend": "host", "mappable": True,
                            "bytes": total, "layout": entries}) + "\n").encode()

    f32 = {"name": "a", "dtype": "F32", "shape": [4], "offset": 0, "bytes": 16}
    attempt("hostile: not JSON", b"nope\n", contains="not JSON")
    attempt("hostile: a refusal without detail", b'{"error":"busy"}\n', reason="busy")
    attempt("hostile: closed before the line", b'{"device":', contains="closed the connection", hang_up=True)
    attempt("hostile: tensor outside the allocation", layout([dict(f32, offset=4090)]), [memfd(4096)],
            contains="outside")
    attempt("hostile: bytes unlike dtype and shape", layout([dict(f32, bytes=20)]), [memfd(4096)],
            contains="20 bytes")
    attempt("hostile: unknown dtype", layout([dict(f32, dtype="F128")]), [memfd(4096)], contains="malformed")
    attempt("hostile: a bool as offset", layout([dict(f32, offset=True)]), [memfd(4096)], contains="malformed")
    attempt("hostile: negative dimension", layout([dict(f32, shape=[-4], bytes=16)]), [memfd(4096)],
            contains="malformed")
    attempt("hostile: a name twice", layout([f32, dict(f32, offset=256)]), [memfd(4096)], contains="twice")
    attempt("hostile: no descriptor", layout([f32]), contains="no file descriptor")
    attempt("hostile: memfd smaller than the layout", layout([f32]), [memfd(1024)], reason="lease_lost")
    attempt("hostile: an unknown device", layout([f32], device="tpu:0"), [memfd(4096)], contains="tpu:0")
    attempt("hostile: an endless line", b"", reason="protocol_error", contains="longer than", trickle=True)
    # two descriptors: the first is the allocation, the other is closed
    t = threading.Thread(target=serve, args=(layout([f32]), [memfd(4096, b"\x02"), memfd(16)]))
    t.start()
    p = attach(path, "0123456789abcdef", "tok")
    a = p.numpy("a")
    check("hostile: two descriptors, the first used", a.tobytes() == b"\x02" * 16)
    del a
    p.close()
    t.join(30)
    listener.close()
    gc.collect()
    check("hostile: no descriptor leaked", open_fds() == before, f"{open_fds()} vs {before}")


def main():
    binary = os.path.abspath(sys.argv[1])
    root = tempfile.mkdtemp(prefix="tg-pypre.")
    srv = None
    try:
        srv = Server(binary, root)
        write = srv.token("write", "acme")
        read = srv.token("read", "acme")
        other = srv.token("read", "other")
        rng = np.random.default_rng(7)
        bf16 = torch.from_numpy(rng.standard_normal((7, 9)).astype(np.float32)).to(torch.bfloat16)
        tensors = [
            ("w", "F32", (64, 64), rng.standard_normal((64, 64)).astype("<f4").tobytes()),
            ("b", "F32", (63,), rng.standard_normal(63).astype("<f4").tobytes()),
            ("f16", "F16", (3, 5), rng.standard_normal((3, 5)).astype("<f2").tobytes()),
            ("bf16", "BF16", (7, 9), bf16.view(torch.int16).numpy().tobytes()),
            ("emb", "I64", (10,), np.arange(-5, 5, dtype="<i8").tobytes()),
            ("mask", "U8", (5,), bytes([1, 0, 255, 3, 7])),
            ("f8", "F8_E4M3", (2, 3), bytes([0x38, 0xB8, 0x00, 0x7E, 0x01, 0x40])),
            ("scalar", "I32", (), struct.pack("<i", -42)),
            ("empty", "F32", (0, 4), b""),
        ]
        path = os.path.join(root, "model.safetensors")
        with open(path, "wb") as f:
            f.write(st_file(tensors))
        with open(path, "rb") as f:
            publish(srv, write, "acme/pre", f.read())
        ref = read_reference(path)
        pid = preload(srv, write, {"model": "acme/pre"})
        host_checks(srv, read, other, write, pid, ref)
        pid = preload(srv, write, {"model": "acme/pre"})
        torch_write_dies(srv, read, pid)
        no_stderr_attach(srv, read, pid)
        cuda_checks(srv, read, write, ref)
        server_stop_checks(srv, read, pid)
        hostile_checks(root)
    except Exception:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        check("the checks ran to the end", False)
    finally:
        if srv is not None:
            srv.stop()
            if FAILED:
                srv.log.seek(0)
                print("--- server log (last lines)\n" + "".join(srv.log.readlines()[-15:]))
        shutil.rmtree(root, ignore_errors=True)
    print(f"{PASSED} passed, {FAILED} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
