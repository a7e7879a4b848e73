"""safe_open(..., verify=): a version's signature (OpenSSF model signing v1, a
Sigstore bundle v0.3 holding a DSSE envelope of an in-toto statement) checked
against the version's file list, with the `cryptography` package (imported only
when verify= is used). docs/SIGNING.md describes the format.

verify=True checks model.server.sig with the key the server publishes at
/.well-known/tensorgate/signing-keys; verify=PEM (a path, or the PEM bytes)
checks model.sig with that EC public key. The signed digests must be exactly the
SHA-256 digests the server lists for the version's files (those the signature's
ignore_paths leave out aside): every byte a read returns is served from the file
under that digest, which the server checked when it stored it."""

import base64
import hashlib
import json

from ._http import TensorgateError

PAYLOAD_TYPE = "application/vnd.in-toto+json"
PREDICATE_TYPE = "https://model_signing/signature/v1.0"
MEDIA_TYPES = (
    "application/vnd.dev.sigstore.bundle.v0.3+json",
    "application/vnd.dev.sigstore.bundle+json;version=0.3",
)
ALWAYS_IGNORED = ("model.sig", "model.server.sig")
MAX_SIGNATURE = 64 << 20


def _refused(reason, detail):
    return TensorgateError(0, reason, "signature refused: " + detail)


def _load_key(pem):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = serialization.load_pem_public_key(pem)
    if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.key_size not in (256, 384, 521):
        raise ValueError("tensorgate: verify= takes an EC public key on P-256, P-384 or P-521")
    return key


def _hash_of(key):
    from cryptography.hazmat.primitives import hashes

    return {256: hashes.SHA256(), 384: hashes.SHA384(), 521: hashes.SHA512()}[key.curve.key_size]


def _pem_hint(key):
    from cryptography.hazmat.primitives import serialization

    pem = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(pem).hexdigest()


def _covered(name, ignore):
    return any(name == p or name.startswith(p.rstrip("/") + "/") for p in ignore)


def verify_bundle(bundle_bytes, key):
    """The signed {name: sha256 hex} and ignore paths of a bundle signed by key."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        bundle = json.loads(bundle_bytes)
        env = bundle["dsseEnvelope"]
        if bundle.get("mediaType") not in MEDIA_TYPES or env["payloadType"] != PAYLOAD_TYPE:
            raise _refused("signature_invalid", "not a Sigstore bundle v0.3 of an in-toto statement")
        if len(env["signatures"]) != 1:
            raise _refused("signature_invalid", "the envelope must hold one signature")
        payload = base64.b64decode(env["payload"], validate=True)
        sig = base64.b64decode(env["signatures"][0]["sig"], validate=True)
        material = bundle["verificationMaterial"]
    except (ValueError, KeyError, TypeError) as e:
        raise _refused("signature_invalid", f"the bundle cannot be read ({e})")
    if "publicKey" not in material:
        raise _refused("signature_untrusted", "the bundle is not signed by a key (a certificate chain)")
    hint = material["publicKey"].get("hint", "")
    if hint and hint != _pem_hint(key):
        raise _refused("signature_untrusted", f"signed by key {hint}, not the key given")
    pae = b"DSSEv1 %d %s %d %s" % (len(PAYLOAD_TYPE), PAYLOAD_TYPE.encode(), len(payload), payload)
    try:
        key.verify(sig, pae, ec.ECDSA(_hash_of(key)))
    except InvalidSignature:
        raise _refused("signature_invalid", "the signature does not verify with the key")
    try:
        st = json.loads(payload)
        if st["_type"] != "https://in-toto.io/Statement/v1" or st["predicateType"] != PREDICATE_TYPE:
            raise _refused("signature_invalid", "not a model signature statement v1.0")
        (subject,) = st["subject"]
        resources = st["predicate"]["resources"]
        ser = st["predicate"]["serialization"]
        if ser.get("method") != "files" or ser.get("hash_type") != "sha256":
            raise _refused("signature_invalid", "only the files/sha256 serialization is supported")
        digests = [bytes.fromhex(r["digest"]) for r in resources]
        if hashlib.sha256(b"".join(digests)).hexdigest() != subject["digest"]["sha256"]:
            raise _refused("signature_invalid", "the subject digest is not the resources' digest")
        signed = {r["name"]: r["digest"].lower() for r in resources}
        return signed, list(ser.get("ignore_paths") or [])
    except (ValueError, KeyError, TypeError) as e:
        raise _refused("signature_invalid", f"the statement cannot be read ({e})")


def check_version(client, vpath, listed, verify):
    """Checks a version (listed: {path: sha256 hex}) against its signature; returns
    {"file", "signed"} or raises TensorgateError (reason signature_*)."""
    from ._remote import _q

    if verify is True:
        keys = client.request("GET", "/.well-known/tensorgate/signing-keys").json().get("keys") or []
        if not keys:
            raise _refused("signature_untrusted", "the server signs nothing (no key at /.well-known/tensorgate/signing-keys)")
        key, name = _load_key(keys[0]["pem"].encode()), "model.server.sig"
    else:
        pem = verify
        if isinstance(pem, str) and not pem.lstrip().startswith("-----BEGIN"):
            with open(pem, "rb") as fh:
                pem = fh.read()
        key, name = _load_key(pem if isinstance(pem, bytes) else pem.encode()), "model.sig"
    if name not in listed:
        raise _refused("signature_required", f"the version has no {name}")
    body = client.request("GET", vpath + "/files/" + _q(name), limit=MAX_SIGNATURE).body
    signed, ignore = verify_bundle(bytes(body), key)
    ignore = list(ignore) + list(ALWAYS_IGNORED)
    signed = {n: d for n, d in signed.items() if not _covered(n, ignore)}
    actual = {n: d.lower() for n, d in listed.items() if not _covered(n, ignore)}
    if signed != actual:
        changed = sorted(n for n in signed if n in actual and signed[n] != actual[n])
        missing = sorted(n for n in signed if n not in actual)
        extra = sorted(n for n in actual if n not in signed)
        parts = [f"{label}: {', '.join(names)}" for label, names in
                 (("changed", changed), ("missing", missing), ("extra", extra)) if names]
        raise _refused("signature_mismatch", "the files differ from what was signed: " + "; ".join(parts))
    return {"file": name, "signed": len(signed)}
