"""tensorgate.numpy: load_file / load as safetensors.numpy has them, returning
NumPy arrays (BF16, F8, F6, F4 tensors raise TypeError: NumPy has no such
dtype; pass dtype="F32" to load_file to have the server convert BF16/F8)."""

from . import _loaders

__all__ = ["load_file", "load"]


def load_file(filename, dtype=None, token=None):
    """dict name -> numpy.ndarray of a URL (file or version) or a local file."""
    return _loaders.load_file(filename, framework="np", dtype=dtype, token=token)


def load(data):
    """dict name -> numpy.ndarray of safetensors bytes."""
    return _loaders.load(data, framework="np")
