"""tensorgate sign | verify against an independent implementation (msig_ref.py).

usage: /usr/bin/python3 tests/signing/test_signing.py path/to/tensorgate

Both directions in key mode (P-256, P-384, P-521) and certificate mode (root +
intermediate CA made here with `cryptography`); tampering refused by both
verifiers (a byte of a file, of the payload, of the signature; the wrong key; a
certificate without the right key usage; an untrusted CA; an extra and a missing
file, named); key and certificate rotation; the reference tool's flag spellings;
usage errors. Each check prints one line; the exit status is the number failed.
"""

import base64
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import msig_ref  # noqa: E402

from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402

TG = os.path.abspath(sys.argv[1])
WORK = tempfile.mkdtemp(prefix="tg-signing-")
failed = 0
passed = 0


def check(cond, what):
    global failed, passed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def tg(*args):
    r = subprocess.run([TG, *args], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def path(*p):
    return os.path.join(WORK, *p)


def write_key(key, name):
    with open(path(name + ".key"), "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    with open(path(name + ".pub"), "wb") as fh:
        fh.write(key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo))
    return path(name + ".key"), path(name + ".pub")


def new_key(name, curve=None):
    key = ec.generate_private_key(curve or ec.SECP256R1())
    return (key, *write_key(key, name))


def make_model(name):
    d = path(name)
    os.makedirs(os.path.join(d, "sub"))
    os.makedirs(os.path.join(d, ".git"))
    with open(os.path.join(d, "model.safetensors"), "wb") as fh:
        fh.write(os.urandom(5000))
    with open(os.path.join(d, "config.json"), "w") as fh:
        fh.write('{"a": 1}\n')
    with open(os.path.join(d, "sub", "tokenizer.json"), "w") as fh:
        fh.write("{}\n")
    with open(os.path.join(d, ".git", "HEAD"), "w") as fh:
        fh.write("ref\n")
    return d


def ref_ok(*a, **kw):
    try:
        return msig_ref.verify(*a, **kw) > 0, ""
    except msig_ref.Refused as e:
        return False, str(e)


def cert(subject, issuer_name, issuer_key, public_key, ca=False, usage="sign", days=30):
    now = datetime.datetime.utcnow() - datetime.timedelta(minutes=5)
    b = (x509.CertificateBuilder()
         .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
         .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
         .public_key(public_key).serial_number(x509.random_serial_number())
         .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                            critical=True)
    elif usage == "sign":
        b = b.add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False),
                            critical=True)
    elif usage == "codesign":
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
    elif usage == "encipher":
        b = b.add_extension(x509.KeyUsage(False, False, True, False, False, False, False, False, False),
                            critical=True)
    return b.sign(issuer_key, hashes.SHA256())


def write_pem(certs, name):
    with open(path(name), "wb") as fh:
        for c in certs:
            fh.write(c.public_bytes(serialization.Encoding.PEM))
    return path(name)


def tamper_bundle(src, dst, field):
    with open(src) as fh:
        b = json.load(fh)
    env = b["dsseEnvelope"]
    if field == "payload":
        raw = bytearray(base64.b64decode(env["payload"]))
        i = raw.find(b'"digest"')
        raw[i + 15] ^= 0x01  # a digit of a digest, still JSON
        env["payload"] = base64.b64encode(bytes(raw)).decode()
    else:
        raw = bytearray(base64.b64decode(env["signatures"][0]["sig"]))
        raw[-3] ^= 0x01
        env["signatures"][0]["sig"] = base64.b64encode(bytes(raw)).decode()
    with open(dst, "w") as fh:
        json.dump(b, fh)


def test_key_mode():
    for curve, label in ((ec.SECP256R1(), "p256"), (ec.SECP384R1(), "p384"), (ec.SECP521R1(), "p521")):
        key, priv, pub = new_key(label, curve)
        d = make_model("key-" + label)
        rc, out = tg("sign", "key", d, "--private-key", priv)
        check(rc == 0, "%s: tensorgate signs (%s)" % (label, out))
        ok, why = ref_ok(d, os.path.join(d, "model.sig"), public_key=key.public_key())
        check(ok, "%s: the independent verifier accepts tensorgate's bundle (%s)" % (label, why))
        rc, out = tg("verify", "key", d, "--signature", os.path.join(d, "model.sig"), "--public_key", pub)
        check(rc == 0 and "verified 3 files" in out, "%s: tensorgate verifies its own (%s)" % (label, out))
        # the other direction: the independent signer's bundle, verified by tensorgate
        sig2 = path(label + "-ref.sig")
        msig_ref.sign(d, key, sig2)
        rc, out = tg("verify", "key", d, "--signature", sig2, "--public-key", pub)
        check(rc == 0, "%s: tensorgate verifies the independent signer's bundle (%s)" % (label, out))


def test_tampering_key():
    key, priv, pub = new_key("t")
    other, _, other_pub = new_key("t-other")
    d = make_model("tamper")
    sig = os.path.join(d, "model.sig")
    tg("sign", "key", d, "--private-key", priv)
    # the wrong key
    rc, out = tg("verify", "key", d, "--signature", sig, "--public-key", other_pub)
    check(rc == 1 and "untrusted" in out, "wrong key refused by tensorgate (%s)" % out)
    check(not ref_ok(d, sig, public_key=other.public_key())[0], "wrong key refused by the reference")
    # a byte of the payload, of the signature
    for field in ("payload", "sig"):
        bad = path("bad-%s.sig" % field)
        tamper_bundle(sig, bad, field)
        rc, out = tg("verify", "key", d, "--signature", bad, "--public-key", pub)
        check(rc == 1 and "bad_signature" in out, "%s byte refused by tensorgate (%s)" % (field, out))
        check(not ref_ok(d, bad, public_key=key.public_key())[0], "%s byte refused by the reference" % field)
    # a byte of a file
    f = os.path.join(d, "model.safetensors")
    data = bytearray(open(f, "rb").read())
    data[100] ^= 0xFF
    open(f, "wb").write(bytes(data))
    rc, out = tg("verify", "key", d, "--signature", sig, "--public-key", pub)
    check(rc == 1 and "changed: model.safetensors" in out, "changed byte named by tensorgate (%s)" % out)
    ok, why = ref_ok(d, sig, public_key=key.public_key())
    check(not ok and "model.safetensors" in why, "changed byte named by the reference (%s)" % why)
    data[100] ^= 0xFF
    open(f, "wb").write(bytes(data))
    # an extra file and a missing one
    open(os.path.join(d, "sub", "extra.bin"), "w").write("x")
    os.rename(os.path.join(d, "config.json"), path("config.json.away"))
    rc, out = tg("verify", "key", d, "--signature", sig, "--public-key", pub)
    check(rc == 1 and "missing: config.json" in out and "extra: sub/extra.bin" in out,
          "extra and missing named by tensorgate (%s)" % out)
    ok, why = ref_ok(d, sig, public_key=key.public_key())
    check(not ok and "config.json" in why and "sub/extra.bin" in why, "named by the reference (%s)" % why)
    # --ignore-paths (both spellings) leaves the extra file out; .git was never signed
    os.rename(path("config.json.away"), os.path.join(d, "config.json"))
    rc, out = tg("verify", "key", d, "--signature", sig, "--public-key", pub, "--ignore_paths", "sub/extra.bin")
    check(rc == 0, "an ignored extra file is no difference (%s)" % out)
    rc, out = tg("verify", "key", d, "--signature", sig, "--public-key", pub, "--ignore-paths",
                 os.path.join(d, "sub", "extra.bin"))
    check(rc == 0, "an ignored path given through DIR (%s)" % out)
    os.remove(os.path.join(d, "sub", "extra.bin"))
    # signing with --ignore-paths records it; both verifiers honour the record
    open(os.path.join(d, "notes.txt"), "w").write("local")
    rc, out = tg("sign", "key", d, "--private-key", priv, "--ignore-paths", "notes.txt")
    check(rc == 0, "sign with --ignore-paths (%s)" % out)
    open(os.path.join(d, "notes.txt"), "w").write("changed later")
    rc, out = tg("verify", "key", d, "--signature", sig, "--public-key", pub)
    check(rc == 0, "a recorded ignore path is honoured by tensorgate (%s)" % out)
    check(ref_ok(d, sig, public_key=key.public_key())[0], "and by the reference")


def test_key_rotation():
    old, old_priv, old_pub = new_key("rot-old")
    new, new_priv, new_pub = new_key("rot-new")
    d = make_model("rotation")
    old_sig = path("rot-old.sig")
    tg("sign", "key", d, "--private-key", old_priv, "--signature", old_sig)
    new_sig = path("rot-new.sig")
    tg("sign", "key", d, "--private-key", new_priv, "--signature", new_sig)
    check(tg("verify", "key", d, "--signature", old_sig, "--public-key", old_pub)[0] == 0,
          "the old signature verifies with the old key")
    check(tg("verify", "key", d, "--signature", old_sig, "--public-key", new_pub)[0] == 1,
          "the old signature is refused with the new key")
    check(tg("verify", "key", d, "--signature", new_sig, "--public-key", new_pub)[0] == 0,
          "the new signature verifies with the new key")
    check(tg("verify", "key", d, "--signature", new_sig, "--public-key", old_pub)[0] == 1,
          "the new signature is refused with the old key")
    check(ref_ok(d, old_sig, public_key=old.public_key())[0]
          and not ref_ok(d, old_sig, public_key=new.public_key())[0], "rotation, the reference")


def make_pki(name):
    root_key = ec.generate_private_key(ec.SECP384R1())
    root = cert(name + " root", name + " root", root_key, root_key.public_key(), ca=True, days=3650)
    inter_key = ec.generate_private_key(ec.SECP256R1())
    inter = cert(name + " intermediate", name + " root", root_key, inter_key.public_key(), ca=True)
    return root, inter, inter_key


def test_certificate_mode():
    root, inter, inter_key = make_pki("A")
    root_pem = write_pem([root], "rootA.pem")
    inter_pem = write_pem([inter], "interA.pem")
    d = make_model("cert")
    sig = os.path.join(d, "model.sig")
    for usage in ("sign", "codesign"):
        leaf_key, priv, _ = new_key("leaf-" + usage)
        leaf = cert("signer " + usage, "A intermediate", inter_key, leaf_key.public_key(), usage=usage)
        leaf_pem = write_pem([leaf], "leaf-%s.pem" % usage)
        rc, out = tg("sign", "certificate", d, "--private_key", priv, "--signing_certificate", leaf_pem,
                     "--certificate_chain", inter_pem, root_pem)
        check(rc == 0, "%s: tensorgate signs with a certificate (%s)" % (usage, out))
        ok, why = ref_ok(d, sig, trusted_cas=[root])
        check(ok, "%s: the reference accepts tensorgate's certificate bundle (%s)" % (usage, why))
        rc, out = tg("verify", "certificate", d, "--signature", sig, "--certificate-chain", root_pem)
        check(rc == 0 and "signer " + usage in out, "%s: tensorgate verifies it (%s)" % (usage, out))
        ref_sig = path("cert-ref-%s.sig" % usage)
        msig_ref.sign(d, leaf_key, ref_sig, certs=[leaf, inter])
        rc, out = tg("verify", "certificate", d, "--signature", ref_sig, "--certificate_chain", root_pem)
        check(rc == 0, "%s: tensorgate verifies the reference's certificate bundle (%s)" % (usage, out))
    # a leaf that may not sign
    leaf_key, priv, _ = new_key("leaf-enc")
    leaf = cert("encipher only", "A intermediate", inter_key, leaf_key.public_key(), usage="encipher")
    leaf_pem = write_pem([leaf], "leaf-enc.pem")
    rc, out = tg("sign", "certificate", d, "--private-key", priv, "--signing-certificate", leaf_pem,
                 "--certificate-chain", inter_pem)
    check(rc == 0, "signing does not judge the usage (%s)" % out)
    rc, out = tg("verify", "certificate", d, "--signature", sig, "--certificate-chain", root_pem)
    check(rc == 1 and "digitalSignature" in out, "a leaf without signing usage refused (%s)" % out)
    ok, why = ref_ok(d, sig, trusted_cas=[root])
    check(not ok and "may not sign" in why, "and by the reference (%s)" % why)
    # a certificate whose key is not the private key's
    _, other_priv, _ = new_key("leaf-other")
    rc, out = tg("sign", "certificate", d, "--private-key", other_priv, "--signing-certificate", leaf_pem,
                 "--certificate-chain", inter_pem)
    check(rc == 2 and "not the private key" in out, "a certificate of another key (%s)" % out)
    # an untrusted CA, and certificate rotation (old CA B, new CA C)
    rootB, interB, interB_key = make_pki("B")
    rootC, interC, interC_key = make_pki("C")
    rootB_pem, rootC_pem = write_pem([rootB], "rootB.pem"), write_pem([rootC], "rootC.pem")
    kB, privB, _ = new_key("leafB")
    kC, privC, _ = new_key("leafC")
    leafB = write_pem([cert("signer B", "B intermediate", interB_key, kB.public_key())], "leafB.pem")
    leafC = write_pem([cert("signer C", "C intermediate", interC_key, kC.public_key())], "leafC.pem")
    sigB, sigC = path("B.sig"), path("C.sig")
    tg("sign", "certificate", d, "--private-key", privB, "--signing-certificate", leafB,
       "--certificate-chain", write_pem([interB], "interB.pem"), "--signature", sigB)
    tg("sign", "certificate", d, "--private-key", privC, "--signing-certificate", leafC,
       "--certificate-chain", write_pem([interC], "interC.pem"), "--signature", sigC)
    rc, out = tg("verify", "certificate", d, "--signature", sigB, "--certificate-chain", root_pem)
    check(rc == 1 and "untrusted" in out, "an untrusted CA refused (%s)" % out)
    check(not ref_ok(d, sigB, trusted_cas=[root])[0], "an untrusted CA refused by the reference")
    check(tg("verify", "certificate", d, "--signature", sigB, "--certificate-chain", rootB_pem)[0] == 0,
          "rotation: the old signature verifies with the old CA")
    check(tg("verify", "certificate", d, "--signature", sigB, "--certificate-chain", rootC_pem)[0] == 1,
          "rotation: the old signature is refused with only the new CA")
    check(tg("verify", "certificate", d, "--signature", sigC, "--certificate-chain", rootC_pem)[0] == 0,
          "rotation: the new signature verifies with the new CA")
    check(ref_ok(d, sigC, trusted_cas=[rootC])[0] and not ref_ok(d, sigC, trusted_cas=[rootB])[0],
          "rotation, the reference")
    # a key-mode verifier given a certificate bundle has no CA: refused, not crashed
    rc, out = tg("verify", "key", d, "--signature", sigC, "--public-key", path("leafC.pub"))
    check(rc == 1, "a certificate bundle checked as a key signature (%s)" % out)


def test_usage_errors():
    d = make_model("usage")
    _, priv, pub = new_key("usage")
    rc, out = tg("sign", "key", d)
    check(rc == 2 and "--private-key is required" in out, "missing key (%s)" % out)
    rc, out = tg("sign", "rsa", d)
    check(rc == 2 and "key or certificate" in out, "unknown mode (%s)" % out)
    rc, out = tg("verify", "key", path("nowhere"), "--public-key", pub)
    check(rc == 2 and "nowhere" in out, "a missing directory (%s)" % out)
    rc, out = tg("verify", "key", d, "--public-key", pub)
    check(rc == 2 and "model.sig" in out, "no signature yet (%s)" % out)
    rc, out = tg("sign", "key", d, "--private-key", pub)
    check(rc == 2 and "private" in out, "a public key given to sign (%s)" % out)
    open(path("junk.sig"), "w").write("[" * 5000)
    rc, out = tg("verify", "key", d, "--signature", path("junk.sig"), "--public-key", pub)
    check(rc == 1 and "malformed" in out, "a hostile bundle (%s)" % out)
    rc, out = tg("sign", "--help")
    check(rc == 0 and "usage: tensorgate sign" in out, "sign --help")
    os.symlink("config.json", os.path.join(d, "link"))
    rc, out = tg("sign", "key", d, "--private-key", priv)
    check(rc == 2 and "symbolic link" in out and not os.path.exists(os.path.join(d, "model.sig")),
          "a symbolic link refused, nothing written (%s)" % out)


# ---------------------------------------------------------------- the server


def _f32_safetensors(values):
    import struct
    data = struct.pack("<%df" % len(values), *values)
    header = json.dumps({"w": {"dtype": "F32", "shape": [len(values)], "data_offsets": [0, len(data)]}}).encode()
    header += b" " * (-len(header) % 8)
    return struct.pack("<Q", len(header)) + header + data


class Server:
    def __init__(self, key_path):
        import re
        import time
        self.data = path("server-data")
        out = subprocess.run([TG, "token", "create", "--data", self.data, "--scope", "admin"],
                             capture_output=True, text=True)
        self.admin = out.stdout.strip().splitlines()[-1]
        self.log = open(path("server.log"), "w+")
        self.proc = subprocess.Popen([TG, "serve", "--listen", "127.0.0.1:0", "--data", self.data,
                                      "--signing-key", key_path], stdout=subprocess.DEVNULL, stderr=self.log)
        self.url = None
        for _ in range(200):
            self.log.seek(0)
            m = re.search(r"listening on http://127.0.0.1:(\d+)", self.log.read())
            if m:
                self.url = "http://127.0.0.1:%s" % m.group(1)
                break
            time.sleep(0.05)
        self.env = dict(os.environ, TENSORGATE_URL=self.url or "", TENSORGATE_TOKEN=self.admin)

    def tg(self, *args):
        r = subprocess.run([TG, *args], capture_output=True, text=True, env=self.env)
        return r.returncode, r.stdout + r.stderr

    def call(self, method, route, body=None):
        import urllib.error
        import urllib.request
        req = urllib.request.Request(self.url + route, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + self.admin,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()


def test_server():
    import time
    server_key, server_priv, server_pub = new_key("server")
    client_key, client_priv, client_pub = new_key("client")
    other_key, _, other_pub = new_key("client-other")
    srv = Server(server_priv)
    check(srv.url is not None, "the server starts with --signing-key")
    if srv.url is None:
        return
    try:
        # the well-known route
        st, body = srv.call("GET", "/.well-known/tensorgate/signing-keys")
        keys = json.loads(body)["keys"]
        check(st == 200 and keys[0]["pem"].encode() == open(server_pub, "rb").read()
              and keys[0]["hint"] == msig_ref.key_hint(server_key.public_key()), "well-known key and hint")
        # a published version holds model.server.sig over its files
        d = path("srv-model")
        os.makedirs(d)
        open(os.path.join(d, "model.safetensors"), "wb").write(_f32_safetensors([1.0, 2.0, 3.0, 4.0]))
        open(os.path.join(d, "config.json"), "w").write('{"x": 1}\n')
        rc, out = srv.tg("push", d, "acme/srv", "--publish")
        check(rc == 0, "push --publish (%s)" % out)
        pulled = path("srv-pulled")
        rc, out = srv.tg("pull", "acme/srv@1", pulled, "--verify")
        check(rc == 0 and "verified 2 files" in out, "pull --verify with the server's key (%s)" % out)
        ok, why = ref_ok(pulled, os.path.join(pulled, "model.server.sig"), public_key=server_key.public_key())
        check(ok, "the independent verifier accepts the server's signature of the pulled files (%s)" % why)
        # the Hub routes list and serve it
        st, body = srv.call("GET", "/api/models/acme/srv/tree/main")
        check(st == 200 and b"model.server.sig" in body, "the Hub tree lists model.server.sig")
        st, body = srv.call("GET", "/acme/srv/resolve/main/model.server.sig")
        check(st == 200 and body == open(os.path.join(pulled, "model.server.sig"), "rb").read(),
              "the Hub resolve route serves it")
        # a pulled byte changed, pull --verify again: the download repairs it; an extra
        # file in the folder is named
        open(os.path.join(pulled, "notes.txt"), "w").write("mine")
        rc, out = srv.tg("pull", "acme/srv@1", pulled, "--verify")
        check(rc == 5 and "extra: notes.txt" in out, "pull --verify names an extra file (%s)" % out)
        os.remove(os.path.join(pulled, "notes.txt"))
        # the Python client
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
        import tensorgate
        with tensorgate.safe_open(srv.url + "/acme/srv@1", verify=True) as f:
            check(f.signature == {"file": "model.server.sig", "signed": 2}, "safe_open(verify=True)")
        try:
            tensorgate.safe_open(srv.url + "/acme/srv@1", verify=other_pub)
            check(False, "safe_open(verify=another key) refused")
        except tensorgate.TensorgateError as e:
            check(e.reason == "signature_required", "verify=PEM wants a model.sig (%s)" % e)
        # a conversion job's version is signed too
        st, body = srv.call("POST", "/v1/models/acme/srv/versions/1/convert", {"dtype": "F16"})
        job = json.loads(body)
        check(st == 202, "conversion accepted (%s)" % body)
        for _ in range(200):
            st, body = srv.call("GET", "/v1/jobs/%s" % job["id"])
            job = json.loads(body)
            if job["state"] in ("done", "failed"):
                break
            time.sleep(0.05)
        check(job["state"] == "done", "conversion done (%s)" % job)
        conv = path("srv-converted")
        rc, out = srv.tg("pull", "acme/srv@%d" % job.get("version", 2), conv, "--verify")
        check(rc == 0, "the converted version verifies (%s)" % out)
        check(ref_ok(conv, os.path.join(conv, "model.server.sig"), public_key=server_key.public_key())[0],
              "and by the independent verifier")
        # a commit through the Hub's write protocol (what upload_folder sends) is signed too
        st, body = srv.call("POST", "/api/repos/create", {"name": "hubsig", "organization": "acme",
                                                          "type": "model"})
        check(st == 200, "Hub create_repo (%s)" % body)
        import base64
        import urllib.error
        import urllib.request
        lines = [{"key": "header", "value": {"summary": "first commit"}}]
        for name, data in (("model.safetensors", _f32_safetensors([7.0, 8.0])), ("config.json", b'{"z": 3}\n')):
            lines.append({"key": "file", "value": {"path": name, "encoding": "base64",
                                                   "content": base64.b64encode(data).decode()}})
        req = urllib.request.Request(srv.url + "/api/models/acme/hubsig/commit/main", method="POST",
                                     data="\n".join(json.dumps(x) for x in lines).encode(),
                                     headers={"Authorization": "Bearer " + srv.admin,
                                              "Content-Type": "application/x-ndjson"})
        try:
            with urllib.request.urlopen(req) as resp:
                st, body = resp.status, resp.read()
        except urllib.error.HTTPError as e:
            st, body = e.code, e.read()
        check(st == 200 and b"commitOid" in body, "Hub commit (%s)" % body)
        hub = path("hub-pulled")
        rc, out = srv.tg("pull", "acme/hubsig@latest", hub, "--verify")
        check(rc == 0 and "verified 2 files" in out, "the Hub commit's version verifies (%s)" % out)
        check(ref_ok(hub, os.path.join(hub, "model.server.sig"), public_key=server_key.public_key())[0],
              "and by the independent verifier")

        # client signatures under a namespace policy
        st, body = srv.call("PUT", "/v1/namespaces/acme/signing",
                            {"trusted_keys": [open(client_pub).read()], "require_signature": True})
        check(st == 200, "policy set (%s)" % body)
        cd = path("client-model")
        os.makedirs(cd)
        open(os.path.join(cd, "model.safetensors"), "wb").write(_f32_safetensors([5.0, 6.0]))
        open(os.path.join(cd, "config.json"), "w").write('{"y": 2}\n')
        rc, out = srv.tg("push", cd, "acme/client", "--publish")
        check(rc == 1 and "signature_required" in out, "unsigned refused under require_signature (%s)" % out)
        msig_ref.sign(cd, client_key, os.path.join(cd, "model.sig"))
        rc, out = srv.tg("push", cd, "acme/client", "--publish")
        check(rc == 0, "a version signed by the independent signer with a trusted key publishes (%s)" % out)
        cp = path("client-pulled")
        rc, out = srv.tg("pull", "acme/client@latest", cp, "--verify", "--public-key", client_pub)
        check(rc == 0, "pull --verify --public-key checks the client's model.sig (%s)" % out)
        check(ref_ok(cp, os.path.join(cp, "model.sig"), public_key=client_key.public_key())[0],
              "the independent verifier accepts the client's model.sig in the pulled folder")
        rc, out = srv.tg("pull", "acme/client@latest", cp, "--verify")
        check(rc == 0, "and the server's model.server.sig beside it (%s)" % out)
        with tensorgate.safe_open(srv.url + "/acme/client@latest", verify=client_pub) as f:
            check(f.signature["file"] == "model.sig", "safe_open(verify=PEM path)")
        try:
            tensorgate.safe_open(srv.url + "/acme/client@latest", verify=open(other_pub, "rb").read())
            check(False, "safe_open with another key refused")
        except tensorgate.TensorgateError as e:
            check(e.reason == "signature_untrusted", "safe_open with another key: untrusted (%s)" % e)
        # a file changed after signing: refused, named
        open(os.path.join(cd, "config.json"), "w").write('{"y": 3}\n')
        rc, out = srv.tg("push", cd, "acme/client", "--publish")
        check(rc == 1 and "signature_mismatch" in out and "config.json" in out,
              "a file changed after signing is refused, named (%s)" % out)
        # signed by a key the namespace does not trust
        msig_ref.sign(cd, other_key, os.path.join(cd, "model.sig"))
        rc, out = srv.tg("push", cd, "acme/client", "--publish")
        check(rc == 1 and "signature_untrusted" in out, "an untrusted key is refused (%s)" % out)
    finally:
        srv.stop()


try:
    test_key_mode()
    test_tampering_key()
    test_key_rotation()
    test_certificate_mode()
    test_usage_errors()
    test_server()
finally:
    shutil.rmtree(WORK, ignore_errors=True)
print("signing: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed or not passed else 0)
