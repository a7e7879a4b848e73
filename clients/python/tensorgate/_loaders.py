"""load_file / load for both frameworks: a URL read through safe_open (a local
path read from disk), or safetensors bytes parsed here."""

from . import _dtypes
from ._remote import safe_open

__all__ = ["load_file", "load"]


def _is_url(s):
    return isinstance(s, str) and (s.startswith("http://") or s.startswith("https://"))


def load_file(filename, device="cpu", framework="np", dtype=None, token=None, verify=None):
    """Every tensor of a remote file or version (a URL, as safe_open takes), or
    of a local .safetensors file, as a dict name -> array/tensor. verify= as
    safe_open's (remote only)."""
    if not _is_url(filename):
        with open(filename, "rb") as fh:
            return load(fh.read(), framework=framework, device=device)
    with safe_open(filename, framework=framework, device=device, dtype=dtype, token=token, verify=verify) as f:
        return f.load_all()


def load(data, framework="np", device="cpu"):
    """Safetensors bytes (bytes, bytearray or memoryview) parsed locally into a
    dict name -> array/tensor, in the file's header order."""
    if framework in ("np", "numpy"):
        if str(device) != "cpu":
            raise ValueError('tensorgate: NumPy arrays live on the cpu; use framework="pt" for another device')
        build = lambda b, dt, sh: _dtypes.to_numpy(b, dt, sh)  # noqa: E731
    elif framework in ("pt", "torch", "pytorch"):
        build = lambda b, dt, sh: _dtypes.to_torch(b, dt, sh, device)  # noqa: E731
    else:
        raise ValueError(f"tensorgate: framework {framework!r} is not one of np, numpy, pt, torch")
    tensors, _meta = _dtypes.parse_bytes(memoryview(data) if not isinstance(data, memoryview) else data)
    return {name: build(b, dt, sh) for name, dt, sh, b in tensors}
