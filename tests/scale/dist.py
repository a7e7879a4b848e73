#!/usr/bin/python3
"""The distributed suite: three tensorgate replicas on one PostgreSQL catalog and
one radosgw bucket, behind nginx as a round-robin load balancer, all real
processes on loopback. Run by tests/scale/dist.sh inside with-postgres.sh and
with-radosgw.sh, which export where the database and the store are and how to
stop and start them (TENSORGATE_TEST_PG, TG_PG_STOP/START, TENSORGATE_TEST_S3_*,
AWS_*, TG_RGW_STOP/START).

Checks (issue 11, item 5):
  1. a sharded model published through the balancer; every file, tensor and slice
     read through each replica, bytes equal to the originals;
  2. a replica killed (SIGKILL) in the middle of an upload: no partial file in the
     catalog, no orphan object after gc, a retry through the balancer succeeds;
  3. the replica running a conversion job killed: another replica takes the job
     over when its lease expires and finishes it; the derived version appears once;
  4. two replicas publishing the same draft at once: one 200, one 409;
  5. radosgw stopped: /readyz false naming the blob store, reads 503 with a
     reason, writes refused cleanly; radosgw back: everything serves, nothing lost;
  6. PostgreSQL restarted under load: every request in flight ends (200 or 503
     with a reason; none hangs, none is a 500), afterwards all serve, nothing lost.
Prints one line per check and "N passed, N failed"."""

import hashlib
import http.client
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

BIN = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build/tensorgate")
PG = os.environ["TENSORGATE_TEST_PG"]
S3_ENDPOINT = os.environ["TENSORGATE_TEST_S3_ENDPOINT"]
S3_BUCKET = os.environ["TENSORGATE_TEST_S3_BUCKET"]
S3_REGION = os.environ.get("AWS_REGION", "us-east-1")
BLOBS = "s3://%s/dist" % S3_BUCKET
LEASE = 3  # seconds: a dead replica's job is taken over after this
WORK = tempfile.mkdtemp(prefix="tg-dist-")
NGINX = "/usr/sbin/nginx"

passed = 0
failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("ok   %s" % name, flush=True)
    else:
        failed += 1
        print("FAIL %s %s" % (name, detail), flush=True)
    return ok


def free_port():
    """A free port below the kernel's ephemeral range (so that no outgoing
    connection takes it before a restarted replica binds it again)."""
    import random
    for _ in range(200):
        port = random.randint(20000, 32000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()
    raise RuntimeError("no free port")


def free_port_unused():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def common_flags():
    return ["--catalog", PG, "--blob-store", BLOBS, "--s3-endpoint", S3_ENDPOINT,
            "--s3-region", S3_REGION]


class Replica:
    def __init__(self, index):
        self.index = index
        self.data = os.path.join(WORK, "replica%d" % index)
        os.makedirs(self.data, exist_ok=True)
        self.port = free_port()
        self.proc = None

    def start(self):
        log = open(os.path.join(WORK, "replica%d.log" % self.index), "ab")
        self.proc = subprocess.Popen(
            [BIN, "serve", "--listen", "127.0.0.1:%d" % self.port, "--data", self.data,
             "--job-lease-seconds", str(LEASE), "--timeout", "10"]
            + common_flags(), stdout=log, stderr=log,
            # conversion steps slowed down (a test hook), so that a job is still
            # running when its replica is killed
            env=dict(os.environ, TENSORGATE_TEST_CONVERT_DELAY_MS="40"))
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                status, _, _ = request(self.port, "GET", "/readyz", timeout=2)
                if status == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError("replica %d did not become ready (see %s)" % (self.index, log.name))

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def request(port, method, path, body=None, token=None, headers=None, timeout=30):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    if body is not None and not isinstance(body, (bytes, bytearray)):
        body = json.dumps(body).encode()
        h.setdefault("Content-Type", "application/json")
    conn.request(method, path, body=body, headers=h)
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), data


def jbody(data):
    try:
        return json.loads(data)
    except ValueError:
        return {}


def safetensors_bytes(tensors, metadata=None):
    header = {}
    blobs = []
    offset = 0
    for name, arr in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        dtype = {np.float32: "F32", np.float16: "F16", np.int32: "I32"}[arr.dtype.type]
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def start_nginx(replicas):
    port = free_port()
    conf_dir = os.path.join(WORK, "nginx")
    os.makedirs(conf_dir, exist_ok=True)
    upstream = "".join("        server 127.0.0.1:%d max_fails=1 fail_timeout=2s;\n" % r.port
                       for r in replicas)
    conf = """%s
worker_processes 1;
pid %s/nginx.pid;
error_log %s/error.log warn;
daemon off;
events { worker_connections 512; }
http {
    access_log %s/access.log;
    client_body_temp_path %s/body;
    proxy_temp_path %s/proxy;
    fastcgi_temp_path %s/fastcgi;
    uwsgi_temp_path %s/uwsgi;
    scgi_temp_path %s/scgi;
    upstream tensorgate {
%s        keepalive 16;
    }
    server {
        listen 127.0.0.1:%d;
        client_max_body_size 0;
        proxy_request_buffering off;
        proxy_buffering off;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host $http_host;
        proxy_read_timeout 30s;
        location / { proxy_pass http://tensorgate; }
    }
}
""" % ("user root;" if os.getuid() == 0 else "", conf_dir, conf_dir, conf_dir, conf_dir,
       conf_dir, conf_dir, conf_dir, conf_dir, upstream, port)
    with open(os.path.join(conf_dir, "nginx.conf"), "w") as f:
        f.write(conf)
    proc = subprocess.Popen([NGINX, "-c", os.path.join(conf_dir, "nginx.conf"), "-p", conf_dir],
                            stderr=open(os.path.join(conf_dir, "stderr"), "wb"))
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nginx did not start")


def make_token():
    out = subprocess.run([BIN, "token", "create", "--data", os.path.join(WORK, "replica0"),
                          "--scope", "admin"], env=dict(os.environ, TENSORGATE_CATALOG=PG),
                         check=True, capture_output=True, text=True, cwd=WORK)
    return out.stdout.strip().splitlines()[-1]


def s3_list(prefix):
    """Keys under prefix in the bucket, listed with a signed GET by curl."""
    out = subprocess.run(
        ["curl", "-sS", "--aws-sigv4", "aws:amz:%s:s3" % S3_REGION,
         "--user", "%s:%s" % (os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]),
         "%s/%s?list-type=2&prefix=%s" % (S3_ENDPOINT, S3_BUCKET, prefix)],
        check=True, capture_output=True, text=True)
    return re.findall(r"<Key>([^<]+)</Key>", out.stdout)


def s3_uploads():
    out = subprocess.run(
        ["curl", "-sS", "--aws-sigv4", "aws:amz:%s:s3" % S3_REGION,
         "--user", "%s:%s" % (os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"]),
         "%s/%s?uploads" % (S3_ENDPOINT, S3_BUCKET)],
        check=True, capture_output=True, text=True)
    return re.findall(r"<UploadId>([^<]+)</UploadId>", out.stdout)


def main():
    replicas = [Replica(i) for i in range(3)]
    nginx = None
    try:
        replicas[0].start()  # the first one migrates the empty catalog
        for r in replicas[1:]:
            r.start()
        nginx, lb = start_nginx(replicas)
        token = make_token()
        run_checks(replicas, lb, token)
    finally:
        for r in replicas:
            r.stop()
        if nginx:
            nginx.terminate()
            nginx.wait()
    print("dist: %d passed, %d failed" % (passed, failed))
    if failed:
        for name in sorted(os.listdir(WORK)):
            if name.endswith(".log"):
                print("--- %s (tail)" % name)
                with open(os.path.join(WORK, name), errors="replace") as f:
                    print("".join(f.readlines()[-20:]))
    subprocess.run(["rm", "-rf", WORK])
    return 1 if failed else 0


def publish_files(lb, token, model, files):
    """Creates model (org/name), a draft, uploads files {path: bytes}, publishes."""
    org, name = model.split("/")
    request(lb, "POST", "/v1/models", {"name": model}, token)
    status, _, data = request(lb, "POST", "/v1/models/%s/%s/versions" % (org, name), b"", token)
    version = jbody(data).get("version")
    for path, body in files.items():
        status, _, data = request(lb, "PUT", "/v1/models/%s/%s/versions/%s/files/%s"
                                  % (org, name, version, path), body, token)
        if status != 201:
            raise RuntimeError("upload %s: %d %s" % (path, status, data[:300]))
    status, _, data = request(lb, "POST", "/v1/models/%s/%s/versions/%s/publish"
                              % (org, name, version), b"", token)
    if status != 200:
        raise RuntimeError("publish: %d %s" % (status, data[:300]))
    return version


def run_checks(replicas, lb, token):
    rng = np.random.default_rng(11)
    # --- 1. a sharded model through the balancer, read back through each replica
    t = {"embed.weight": rng.standard_normal((64, 48)).astype(np.float32),
         "layer0.weight": rng.standard_normal((48, 48)).astype(np.float16),
         "layer1.weight": rng.standard_normal((48, 96)).astype(np.float32),
         "lm_head.weight": rng.standard_normal((96, 64)).astype(np.float32),
         "counts": np.arange(40, dtype=np.int32)}
    shard1 = safetensors_bytes({k: t[k] for k in ["embed.weight", "layer0.weight"]})
    shard2 = safetensors_bytes({k: t[k] for k in ["layer1.weight", "lm_head.weight", "counts"]})
    index = json.dumps({"metadata": {"total_size": sum(a.nbytes for a in t.values())}, "weight_map": {
        "embed.weight": "model-00001-of-00002.safetensors",
        "layer0.weight": "model-00001-of-00002.safetensors",
        "layer1.weight": "model-00002-of-00002.safetensors",
        "lm_head.weight": "model-00002-of-00002.safetensors",
        "counts": "model-00002-of-00002.safetensors"}}).encode()
    files = {"model-00001-of-00002.safetensors": shard1,
             "model-00002-of-00002.safetensors": shard2,
             "model.safetensors.index.json": index,
             "config.json": b'{"hidden_size": 48}\n'}
    version = publish_files(lb, token, "dist/sharded", files)
    base = "/v1/models/dist/sharded/versions/%s" % version
    ok = True
    for r in replicas:
        for path, body in files.items():
            status, _, data = request(r.port, "GET", "%s/files/%s" % (base, path))
            ok &= check("replica %d: file %s bytes equal" % (r.index, path),
                        status == 200 and data == body, "status %d" % status)
            status, hdrs, data = request(r.port, "GET", "%s/files/%s" % (base, path),
                                         headers={"Range": "bytes=3-20"})
            ok &= check("replica %d: range of %s" % (r.index, path),
                        status == 206 and data == body[3:21], "status %d" % status)
        for name, arr in t.items():
            status, _, data = request(r.port, "GET", "%s/tensors/%s" % (base, name))
            ok &= check("replica %d: tensor %s" % (r.index, name),
                        status == 200 and data == np.ascontiguousarray(arr).tobytes(),
                        "status %d" % status)
        status, _, data = request(r.port, "GET", "%s/tensors/lm_head.weight?slice=1:90:3,::-2" % base)
        want = np.ascontiguousarray(t["lm_head.weight"][1:90:3, ::-2]).tobytes()
        check("replica %d: slice 1:90:3,::-2" % r.index, status == 200 and data == want,
              "status %d" % status)

    # --- 2. a replica killed in the middle of an upload
    victim = replicas[1]
    big = safetensors_bytes({"w": rng.standard_normal((3 * 1024 * 1024,)).astype(np.float32)})
    org_model = "/v1/models/dist/killed"
    request(lb, "POST", "/v1/models", {"name": "dist/killed"}, token)
    status, _, data = request(lb, "POST", org_model + "/versions", b"", token)
    kv = jbody(data).get("version")
    upath = "%s/versions/%s/files/model.safetensors" % (org_model, kv)
    body_path = os.path.join(WORK, "big.safetensors")
    with open(body_path, "wb") as f:
        f.write(big)
    curl = subprocess.Popen(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                             "--limit-rate", "2M", "-H", "Authorization: Bearer " + token,
                             "-T", body_path, "http://127.0.0.1:%d%s" % (victim.port, upath)],
                            stdout=subprocess.PIPE)
    time.sleep(3.5)  # about 7 MiB of 12 MiB sent: past the first multipart part
    victim.kill()
    curl.wait(30)
    status, _, data = request(lb, "GET", "%s/versions/%s/files" % (org_model, kv))
    names = [f.get("path") for f in jbody(data).get("files", [])]
    check("killed upload: no partial file in the catalog", status == 200 and names == [],
          "status %d files %s" % (status, names))
    victim.start()
    gc = subprocess.run([BIN, "gc", "--data", os.path.join(WORK, "replica0"), "--blob-store", BLOBS,
                         "--s3-endpoint", S3_ENDPOINT, "--s3-region", S3_REGION, "--gc-grace", "0"],
                        env=dict(os.environ, TENSORGATE_CATALOG=PG),
                        capture_output=True, text=True, cwd=WORK)
    check("gc after the kill exits 0", gc.returncode == 0, gc.stdout + gc.stderr)
    keys = s3_list("dist/")
    stray = [k for k in keys if "/sha256/" not in k]
    check("no temporary object or incomplete multipart upload survives gc",
          stray == [] and s3_uploads() == [], "keys %s uploads %s" % (stray, s3_uploads()))
    shas = set(hashlib.sha256(b).hexdigest() for b in files.values())
    objects = set(k.rsplit("/", 1)[-1] for k in keys)
    check("every object left is referenced (no orphan)", objects <= shas,
          "unreferenced: %s" % (objects - shas))
    status, _, data = request(lb, "PUT", upath, big, token)
    check("the retried upload through the balancer succeeds", status == 201,
          "status %d %s" % (status, data[:200]))

    # --- 3. the replica running a conversion job killed; another one finishes it
    conv = {"w%d" % i: rng.standard_normal((1024, 1024)).astype(np.float32) for i in range(4)}
    cv = publish_files(lb, token, "dist/convert", {"model.safetensors": safetensors_bytes(conv)})
    status, hdrs, data = request(lb, "POST", "/v1/models/dist/convert/versions/%s/convert" % cv,
                                 {"dtype": "F16"}, token)
    job = jbody(data)
    check("convert job accepted", status == 202, "status %d %s" % (status, data[:200]))
    holder = None
    deadline = time.time() + 20
    while time.time() < deadline and holder is None:
        _, _, data = request(lb, "GET", "/v1/jobs/%s" % job.get("id"))
        j = jbody(data)
        worker = j.get("worker") or ""
        if j.get("state") == "running" and worker:
            for r in replicas:
                if worker.endswith(":%d" % r.proc.pid):
                    holder = r
        time.sleep(0.1)
    check("the running job names the replica that holds it", holder is not None,
          "job %s" % j)
    if holder is not None:
        holder.kill()
        deadline = time.time() + 60
        while time.time() < deadline:
            _, _, data = request(lb, "GET", "/v1/jobs/%s" % job.get("id"))
            j = jbody(data)
            if j.get("state") in ("done", "failed"):
                break
            time.sleep(0.2)
        check("another replica finished the job", j.get("state") == "done", "job %s" % j)
        _, _, data = request(lb, "GET", "/v1/models/dist/convert")
        derived = [v for v in jbody(data).get("versions", []) if v.get("version") != cv]
        check("the derived version appears exactly once", len(derived) == 1, "versions %s" % derived)
        holder.start()

    # --- 4. two replicas publish the same draft at once
    request(lb, "POST", "/v1/models", {"name": "dist/race"}, token)
    _, _, data = request(lb, "POST", "/v1/models/dist/race/versions", b"", token)
    rv = jbody(data).get("version")
    request(lb, "PUT", "/v1/models/dist/race/versions/%s/files/model.safetensors" % rv,
            safetensors_bytes({"x": np.ones(8, np.float32)}), token)
    results = []
    barrier = threading.Barrier(2)

    def publish(r):
        barrier.wait()
        s, _, _ = request(r.port, "POST", "/v1/models/dist/race/versions/%s/publish" % rv, b"", token)
        results.append(s)

    threads = [threading.Thread(target=publish, args=(r,)) for r in replicas[:2]]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    check("same draft published at once on two replicas: one 200, one 409",
          sorted(results) == [200, 409], "statuses %s" % results)

    # --- 5. radosgw stopped, then back
    subprocess.run(os.environ["TG_RGW_STOP"], shell=True, check=True)
    time.sleep(0.5)
    status, _, data = request(replicas[0].port, "GET", "/readyz", timeout=20)
    check("radosgw down: /readyz not ready and names the blob store",
          status == 503 and b"blob" in data, "status %d %s" % (status, data[:300]))
    t0 = time.time()
    status, hdrs, data = request(replicas[2].port, "GET", "%s/files/config.json" % base, timeout=60)
    check("radosgw down: a file read is 503 with a reason, quickly",
          status == 503 and jbody(data).get("reason") and time.time() - t0 < 30,
          "status %d %s after %.1fs" % (status, data[:200], time.time() - t0))
    _, _, data = request(lb, "POST", "/v1/models/dist/sharded/versions", b"", token)
    dv = jbody(data).get("version")
    status, _, data = request(lb, "PUT", "/v1/models/dist/sharded/versions/%s/files/x.safetensors" % dv,
                              safetensors_bytes({"x": np.ones(4, np.float32)}), token, timeout=60)
    check("radosgw down: an upload is refused cleanly (503 with a reason)",
          status == 503 and jbody(data).get("reason"), "status %d %s" % (status, data[:200]))
    subprocess.run(os.environ["TG_RGW_START"], shell=True, check=True)
    ready = False
    deadline = time.time() + 60
    while time.time() < deadline and not ready:
        ready = all(request(r.port, "GET", "/readyz", timeout=5)[0] == 200 for r in replicas)
        time.sleep(0.3)
    check("radosgw back: every replica ready", ready)
    same = all(request(lb, "GET", "%s/files/%s" % (base, p))[2] == b for p, b in files.items())
    check("radosgw back: every file serves, nothing lost", same)

    # --- 6. PostgreSQL restarted under load
    stop = threading.Event()
    outcomes = {}
    odd = []
    lock = threading.Lock()

    def load(r):
        while not stop.is_set():
            t0 = time.time()
            try:
                s, _, d = request(r.port, "GET", "/v1/models/dist/sharded/versions/latest/files",
                                  timeout=40)
                key = s if s != 503 or jbody(d).get("reason") else "503-no-reason"
                if key not in (200, 503):
                    with lock:
                        odd.append(d[:200])
            except (OSError, http.client.HTTPException) as e:
                key = "error:%s" % type(e).__name__
            if time.time() - t0 > 35:
                key = "hang"
            with lock:
                outcomes[key] = outcomes.get(key, 0) + 1

    loaders = [threading.Thread(target=load, args=(r,)) for r in replicas for _ in range(2)]
    for th in loaders:
        th.start()
    time.sleep(1)
    subprocess.run(os.environ["TG_PG_STOP"], shell=True, check=True)
    time.sleep(2)
    subprocess.run(os.environ["TG_PG_START"], shell=True, check=True)
    time.sleep(3)
    stop.set()
    for th in loaders:
        th.join()
    bad = {k: v for k, v in outcomes.items() if k not in (200, 503)}
    check("PostgreSQL restart under load: only 200 or 503 with a reason, no hang",
          not bad and outcomes.get(200, 0) > 0, "outcomes %s %s" % (outcomes, odd[:3]))
    healed = False
    deadline = time.time() + 30
    while time.time() < deadline and not healed:
        healed = all(request(r.port, "GET", "%s/files" % base)[0] == 200 for r in replicas)
        time.sleep(0.3)
    check("after the restart every replica serves the catalog", healed)
    same = all(request(lb, "GET", "%s/files/%s" % (base, p))[2] == b for p, b in files.items())
    check("after the restart nothing is lost", same)


if __name__ == "__main__":
    sys.exit(main())
