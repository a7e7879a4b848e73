"""tensorgate: read tensors of a remote tensorgate model with the API of the
`safetensors` package (safe_open, load_file, load), fetching only the tensors
and slices asked for; the server converts dtypes on request.

    from tensorgate import safe_open
    with safe_open("http://host:8080/acme/tiny@latest", framework="np") as f:
        w = f.get_tensor("model.embed.weight")
        part = f.get_slice("lm_head.weight")[:, 1024:2048]

Standard library plus NumPy; torch only for framework="pt"."""

from ._http import TensorgateError
from ._loaders import load, load_file
from ._remote import RawTensor, RemoteSlice, safe_open

__all__ = ["safe_open", "load_file", "load", "TensorgateError", "RemoteSlice", "RawTensor"]
__version__ = "0.1.0"
