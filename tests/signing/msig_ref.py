"""An independent signer and verifier of the OpenSSF model-signing format v1.

Written from the format's description (docs/SIGNING.md), not from tensorgate's C
code, with the `cryptography` package only (Debian's python3-cryptography), so
that the tests never check tensorgate's output with tensorgate's own parser:

  manifest   every regular file under the model directory (not the ignored paths),
             by relative POSIX name, sorted, each with its SHA-256;
  statement  in-toto Statement v1, predicateType https://model_signing/signature/v1.0,
             one subject whose digest.sha256 is SHA-256(concatenated raw digests);
  envelope   DSSE, payloadType application/vnd.in-toto+json, one ECDSA signature over
             PAE = "DSSEv1 <len type> <type> <len payload> <payload>";
  bundle     Sigstore bundle v0.3 JSON: publicKey.hint (hex SHA-256 of the key's PEM)
             or x509CertificateChain.certificates[].rawBytes (DER, leaf first).

The certificate chain is checked by hand (issuer by name, signature by the issuer's
key, CA basic constraints, validity at the leaf's notBefore), since the Debian
`cryptography` of bookworm has no chain verifier.
"""

import base64
import datetime
import hashlib
import json
import os

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATE_TYPE = "https://model_signing/signature/v1.0"
MEDIA_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
DEFAULT_IGNORE = [".git", ".gitattributes", ".github", ".gitignore", "model.server.sig"]


class Refused(Exception):
    """A signature this verifier does not accept; str() says why."""


def _covered(name, ignore):
    return any(name == p or name.startswith(p + "/") for p in ignore)


def manifest(model_dir, ignore=()):
    """{relative name: sha256 hex} of every file under model_dir not ignored."""
    out = {}
    for root, dirs, files in os.walk(model_dir):
        rel_root = os.path.relpath(root, model_dir)
        for f in files:
            name = f if rel_root == "." else rel_root.replace(os.sep, "/") + "/" + f
            if _covered(name, ignore):
                continue
            with open(os.path.join(root, f), "rb") as fh:
                out[name] = hashlib.sha256(fh.read()).hexdigest()
    return out


def _hash_for(public_key):
    size = public_key.curve.key_size
    return {256: hashes.SHA256(), 384: hashes.SHA384(), 521: hashes.SHA512()}[size]


def pae(payload_type, payload):
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def key_hint(public_key):
    pem = public_key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(pem).hexdigest()


def statement(files, model_name, ignore):
    names = sorted(files)
    root = hashlib.sha256(b"".join(bytes.fromhex(files[n]) for n in names)).hexdigest()
    return {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": model_name, "digest": {"sha256": root}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "serialization": {
                "method": "files",
                "hash_type": "sha256",
                "allow_symlinks": False,
                "ignore_paths": list(ignore),
            },
            "resources": [{"name": n, "algorithm": "sha256", "digest": files[n]} for n in names],
        },
    }


def sign(model_dir, private_key, signature_path, certs=None, extra_ignore=()):
    """Writes a bundle for model_dir; certs: [leaf, ...] (cryptography certificates)."""
    ignore = [os.path.basename(signature_path)] + DEFAULT_IGNORE + list(extra_ignore)
    files = manifest(model_dir, ignore)
    name = os.path.basename(os.path.abspath(model_dir))
    payload = json.dumps(statement(files, name, ignore), indent=2).encode()
    sig = private_key.sign(pae(PAYLOAD_TYPE, payload), ec.ECDSA(_hash_for(private_key.public_key())))
    if certs:
        material = {
            "x509CertificateChain": {
                "certificates": [
                    {"rawBytes": base64.b64encode(c.public_bytes(serialization.Encoding.DER)).decode()}
                    for c in certs
                ]
            }
        }
    else:
        material = {"publicKey": {"hint": key_hint(private_key.public_key())}}
    bundle = {
        "mediaType": MEDIA_TYPE,
        "verificationMaterial": material,
        "dsseEnvelope": {
            "payload": base64.b64encode(payload).decode(),
            "payloadType": PAYLOAD_TYPE,
            "signatures": [{"sig": base64.b64encode(sig).decode(), "keyid": ""}],
        },
    }
    with open(signature_path, "w") as fh:
        json.dump(bundle, fh)


def _check_chain(der_list, trusted):
    """The leaf's public key, once the chain reaches a trusted certificate."""
    if not der_list:
        raise Refused("no certificate in the chain")
    chain = [x509.load_der_x509_certificate(d) for d in der_list]
    leaf = chain[0]
    at = leaf.not_valid_before
    pool = chain[1:] + list(trusted)
    trusted_der = {t.public_bytes(serialization.Encoding.DER) for t in trusted}
    cert = leaf
    for _ in range(10):
        if cert.public_bytes(serialization.Encoding.DER) in trusted_der:
            break
        issuers = [c for c in pool if c.subject == cert.issuer]
        issuer = None
        for c in issuers:
            try:
                c.public_key().verify(
                    cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm)
                )
                issuer = c
                break
            except (InvalidSignature, TypeError, AttributeError):
                continue
        if issuer is None:
            raise Refused("untrusted: no trusted issuer for %s" % cert.subject.rfc4514_string())
        try:
            bc = issuer.extensions.get_extension_for_class(x509.BasicConstraints).value
        except x509.ExtensionNotFound:
            bc = None
        if bc is None or not bc.ca:
            raise Refused("untrusted: issuer %s is no CA" % issuer.subject.rfc4514_string())
        if not (issuer.not_valid_before <= at <= issuer.not_valid_after):
            raise Refused("untrusted: issuer not valid at signing time")
        cert = issuer
    else:
        raise Refused("untrusted: chain too long")
    ok = False
    try:
        ok = leaf.extensions.get_extension_for_class(x509.KeyUsage).value.digital_signature
    except x509.ExtensionNotFound:
        pass
    if not ok:
        try:
            eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
            ok = ExtendedKeyUsageOID.CODE_SIGNING in eku
        except x509.ExtensionNotFound:
            pass
    if not ok:
        raise Refused("untrusted: the leaf may not sign (no digitalSignature, no codeSigning)")
    return leaf.public_key()


def verify(model_dir, signature_path, public_key=None, trusted_cas=(), extra_ignore=()):
    """Returns the number of files verified, or raises Refused."""
    with open(signature_path) as fh:
        bundle = json.load(fh)
    if bundle.get("mediaType") != MEDIA_TYPE:
        raise Refused("not a bundle v0.3")
    env = bundle["dsseEnvelope"]
    if env["payloadType"] != PAYLOAD_TYPE or len(env["signatures"]) != 1:
        raise Refused("not an in-toto DSSE envelope with one signature")
    payload = base64.b64decode(env["payload"])
    sig = base64.b64decode(env["signatures"][0]["sig"])
    material = bundle["verificationMaterial"]
    if "x509CertificateChain" in material:
        ders = [base64.b64decode(c["rawBytes"]) for c in material["x509CertificateChain"]["certificates"]]
        key = _check_chain(ders, trusted_cas)
    else:
        if public_key is None:
            raise Refused("untrusted: a key signature and no key")
        hint = material.get("publicKey", {}).get("hint", "")
        if hint and hint != key_hint(public_key):
            raise Refused("untrusted: signed by another key")
        key = public_key
    try:
        key.verify(sig, pae(PAYLOAD_TYPE, payload), ec.ECDSA(_hash_for(key)))
    except InvalidSignature:
        raise Refused("invalid: the signature does not verify")
    st = json.loads(payload)
    if st["_type"] != "https://in-toto.io/Statement/v1" or st["predicateType"] != PREDICATE_TYPE:
        raise Refused("not a model signature statement")
    (subject,) = st["subject"]
    res = st["predicate"]["resources"]
    root = hashlib.sha256(b"".join(bytes.fromhex(r["digest"]) for r in res)).hexdigest()
    if root != subject["digest"]["sha256"]:
        raise Refused("invalid: the subject digest is not the resources'")
    ignore = list(st["predicate"]["serialization"].get("ignore_paths", [])) + list(extra_ignore)
    ignore += [os.path.basename(signature_path)] + DEFAULT_IGNORE
    signed = {r["name"]: r["digest"] for r in res if not _covered(r["name"], ignore)}
    actual = manifest(model_dir, ignore)
    if signed != actual:
        changed = sorted(n for n in signed if n in actual and signed[n] != actual[n])
        missing = sorted(n for n in signed if n not in actual)
        extra = sorted(n for n in actual if n not in signed)
        raise Refused("mismatch: changed %s missing %s extra %s" % (changed, missing, extra))
    return len(actual)
