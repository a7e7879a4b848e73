"""tensorgate.torch: load_file / load as safetensors.torch has them, returning
torch tensors (BF16 as torch.bfloat16; F8 needs a torch with float8 dtypes,
which torch 1.13 lacks: pass dtype="F32" to have the server convert)."""

from . import _loaders

__all__ = ["load_file", "load"]


def load_file(filename, device="cpu", dtype=None, token=None):
    """dict name -> torch.Tensor of a URL (file or version) or a local file."""
    return _loaders.load_file(filename, device=device, framework="pt", dtype=dtype, token=token)


def load(data, device="cpu"):
    """dict name -> torch.Tensor of safetensors bytes."""
    return _loaders.load(data, framework="pt", device=device)
