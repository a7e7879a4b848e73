"""Zero-copy preloads for colocated Python processes.

A tensorgate server can hold the tensors of a model version resident in one
allocation (POST /v1/preloads): host memory (a sealed memfd) or a CUDA device
(a CUDA VMM allocation). A process on the same host takes a *lease* on it over
the server's unix socket and uses the tensors in place, without a copy and
without reading the file:

    from tensorgate.preload import attach
    with attach("/data/preload.sock", "0123456789abcdef", token) as p:
        w = p.numpy("model.embed.weight")     # read-only NumPy view of the mapping
        t = p.torch("model.embed.weight")     # torch tensor over the same memory
        ...
        del w, t                              # before the lease ends

The contract (docs/preload-handoff.md):

- The open connection is the lease. While it is open the server keeps the
  memory: a DELETE or an eviction waits (202, state "evicting").
- close() ends the lease, and refuses (PreloadInUse) while any array or tensor
  made by this object (or derived from one: slices, reshapes, views) is alive,
  so no view can outlive its lease through this API. When the Preload is
  dropped, or a with-block is left by an exception, while views are alive, the
  lease is kept until the last of them is gone, then ended.
- Host views are read-only. A NumPy array says so (writing raises ValueError).
  torch has no read-only tensors: writing into a host preload tensor touches a
  read-only mapping and the process dies with SIGSEGV; clone() what you modify.
  CUDA preloads are mapped read-only for the device too (a kernel writing faults).
- If the server stops, it frees host preloads even while leased; touching a view
  afterwards raises SIGBUS. check() says whether the lease still holds. Unless
  told not to (fault_handler=False), attach() enables Python's faulthandler so
  such a crash prints the Python traceback instead of dying silently.

Standard library plus NumPy; torch only for .torch(); libcuda.so.1 (through
ctypes) only for a cuda:N preload."""

import ctypes
import faulthandler
import json
import mmap
import os
import select
import socket
import sys
import threading
import warnings
import weakref

import numpy as np

from ._dtypes import DTYPES
from ._http import TensorgateError

__all__ = ["attach", "Preload", "PreloadError", "PreloadInUse", "TensorInfo", "CudaDriver"]

REPLY_MAX = 64 << 20  # bytes of the layout line, as the C client
_FDS_MAX = 4  # descriptors accepted with the reply; one is expected, the rest closed


class PreloadError(TensorgateError):
    """A refusal by the socket or a broken hand-off. reason: the server's reason
    code (unauthorized, forbidden, preload_not_found, not_resident, busy,
    forbidden_uid, model_deleted, ...) or one of this module's:
    connection_failed, protocol_error, mapping_failed, preload_in_use, lease_lost,
    lease_ended, cuda_unavailable, cuda_error. status is 0 (no HTTP)."""

    def __init__(self, reason, detail):
        super().__init__(0, reason, detail)


class PreloadInUse(PreloadError):
    """close() while arrays or tensors over the preload are still alive."""

    def __init__(self, detail):
        super().__init__("preload_in_use", detail)


class TensorInfo:
    """One tensor of the layout: name, dtype ("BF16", ...), shape (tuple),
    offset (in the allocation, a multiple of the alignment) and bytes."""

    __slots__ = ("name", "dtype", "shape", "offset", "bytes")

    def __init__(self, name, dtype, shape, offset, nbytes):
        self.name, self.dtype, self.shape, self.offset, self.bytes = name, dtype, shape, offset, nbytes

    def __repr__(self):
        return f"TensorInfo({self.name!r}, {self.dtype}, {list(self.shape)}, offset={self.offset}, bytes={self.bytes})"


# ---------------------------------------------------------------- the hand-off


def _is_count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _receive(sock):
    """(reply line bytes, [fds]) read with recvmsg; fds arrive close-on-exec."""
    data = bytearray()
    fds = []
    room = socket.CMSG_SPACE(_FDS_MAX * 4)
    try:
        while True:
            chunk, ancillary, _flags, _addr = sock.recvmsg(1 << 20, room, socket.MSG_CMSG_CLOEXEC)
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    usable = len(payload) - len(payload) % 4
                    fds.extend(int.from_bytes(payload[i : i + 4], sys.byteorder) for i in range(0, usable, 4))
            if not chunk:
                raise PreloadError("protocol_error", "the server closed the connection before the layout line")
            newline = chunk.find(b"\n")
            data += chunk if newline < 0 else chunk[:newline]
            if len(data) > REPLY_MAX:
                raise PreloadError("protocol_error", f"the server's reply is longer than {REPLY_MAX} bytes")
            if newline >= 0:
                return bytes(data), fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise


def _parse(line):
    """The reply as a dict with a checked layout (a list of TensorInfo)."""
    try:
        reply = json.loads(line)
    except (ValueError, UnicodeDecodeError) as e:
        raise PreloadError("protocol_error", f"the server's reply is not JSON: {e}") from None
    if not isinstance(reply, dict):
        raise PreloadError("protocol_error", "the server's reply is not a JSON object")
    if "error" in reply:
        raise PreloadError(str(reply["error"]), str(reply.get("detail") or "refused by the preload socket"))
    total, device, layout = reply.get("bytes"), reply.get("device"), reply.get("layout")
    if not _is_count(total) or not isinstance(device, str) or not isinstance(layout, list):
        raise PreloadError("protocol_error", "the reply has no layout (bytes, device, layout)")
    tensors = {}
    for i, e in enumerate(layout):
        if not isinstance(e, dict):
            raise PreloadError("protocol_error", f"layout entry {i} is not an object")
        name, dtype, shape = e.get("name"), e.get("dtype"), e.get("shape")
        offset, nbytes = e.get("offset"), e.get("bytes")
        if (
            not isinstance(name, str)
            or dtype not in DTYPES
            or not isinstance(shape, list)
            or not all(_is_count(d) for d in shape)
            or not _is_count(offset)
            or not _is_count(nbytes)
        ):
            raise PreloadError("protocol_error", f"layout entry {i} is malformed")
        elements = 1
        for d in shape:
            elements *= d
        if nbytes != (elements * DTYPES[dtype][0] + 7) // 8:
            raise PreloadError("protocol_error", f"tensor {name!r} has {nbytes} bytes for {dtype} {shape}")
        # every tensor inside the allocation before anything reads through it
        if offset > total or nbytes > total - offset:
            raise PreloadError("protocol_error", f"tensor {name!r} lies outside the allocation")
        if name in tensors:
            raise PreloadError("protocol_error", f"tensor {name!r} is twice in the layout")
        tensors[name] = TensorInfo(name, dtype, tuple(shape), offset, nbytes)
    reply["layout"] = list(tensors.values())
    return reply


# ---------------------------------------------------------------- the lease


class _Lease:
    """The socket, the descriptor and the mapping, and how many views are alive.
    Finalizers of the views hold it, so it outlives a dropped Preload while any
    view lives."""

    def __init__(self, sock):
        self.sock = sock
        self.fd = -1
        self.memory = None  # mmap.mmap of a host preload
        self.cuda = None  # _CudaMapping of a cuda:N preload
        self.live = 0
        self.deferred = False  # end the lease when the last view is gone
        self.lock = threading.Lock()

    def track(self, holder):
        """holder lives exactly as long as some view of the memory."""
        with self.lock:
            self.live += 1
        f = weakref.finalize(holder, self._gone)
        f.atexit = False

    def _gone(self):
        with self.lock:
            self.live -= 1
            end = self.deferred and self.live == 0
        if end:
            self.end(quiet=True)

    def end(self, quiet=False):
        """Unmaps, closes the descriptor and the socket (the lease). False when a
        buffer export of the mapping is still alive (then nothing is closed)."""
        if self.memory is not None:
            try:
                self.memory.close()
            except BufferError:
                if quiet:
                    return False
                raise PreloadInUse(
                    "a buffer of the preload's mapping is still in use (a memoryview or an array made from one); "
                    "delete it first"
                ) from None
            self.memory = None
        if self.cuda is not None:
            try:
                self.cuda.close()
            finally:
                self.cuda = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        return True


# ---------------------------------------------------------------- CUDA

CUDA_SUCCESS = 0
_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1
_CU_MEM_ALLOCATION_TYPE_PINNED = 0x1
_CU_MEM_LOCATION_TYPE_DEVICE = 0x1
_CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1


class _CUmemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _CUmemAllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _CUmemAllocationProp(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _CUmemLocation),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _CUmemAllocFlags),
    ]


class _CUmemAccessDesc(ctypes.Structure):
    _fields_ = [("location", _CUmemLocation), ("flags", ctypes.c_int)]


class CudaDriver:
    """The CUDA driver calls a cuda:N preload needs, through ctypes on
    libcuda.so.1. Each method is one driver call (errors raise PreloadError
    "cuda_error" naming the call and the CUresult); a test substitutes an object
    with the same methods (attach(..., cuda_driver=...))."""

    LIBRARY = "libcuda.so.1"

    def __init__(self, library=None):
        name = library or self.LIBRARY
        try:
            self.lib = ctypes.CDLL(name)
        except OSError as e:
            raise PreloadError(
                "cuda_unavailable",
                f"cannot load the CUDA driver {name}: {e}; a cuda:N preload needs the NVIDIA driver on this host",
            ) from None
        u64, size, ptr = ctypes.c_ulonglong, ctypes.c_size_t, ctypes.c_void_p
        sig = {
            "cuInit": [ctypes.c_uint],
            "cuDeviceGet": [ctypes.POINTER(ctypes.c_int), ctypes.c_int],
            "cuDevicePrimaryCtxRetain": [ctypes.POINTER(ptr), ctypes.c_int],
            "cuCtxSetCurrent": [ptr],
            "cuMemImportFromShareableHandle": [ctypes.POINTER(u64), ptr, ctypes.c_int],
            "cuMemGetAllocationGranularity": [ctypes.POINTER(size), ctypes.POINTER(_CUmemAllocationProp), ctypes.c_int],
            "cuMemAddressReserve": [ctypes.POINTER(u64), size, size, u64, u64],
            "cuMemAddressFree": [u64, size],
            "cuMemMap": [u64, size, size, u64, u64],
            "cuMemUnmap": [u64, size],
            "cuMemSetAccess": [u64, size, ctypes.POINTER(_CUmemAccessDesc), size],
            "cuMemRelease": [u64],
            "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
        }
        for fn, argtypes in sig.items():
            try:
                f = getattr(self.lib, fn)
            except AttributeError:
                raise PreloadError(
                    "cuda_unavailable", f"the CUDA driver {name} has no {fn} (a driver too old)"
                ) from None
            f.restype, f.argtypes = ctypes.c_int, argtypes
        self._check("cuInit", self.lib.cuInit(0))
        self._contexts = {}

    def _check(self, call, result):
        if result != CUDA_SUCCESS:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorName(result, ctypes.byref(text))
            label = text.value.decode() if text.value else f"CUDA error {result}"
            raise PreloadError("cuda_error", f"{call}: {label}")

    def make_current(self, ordinal):
        """Makes the device's primary context (the one torch uses) current."""
        if ordinal not in self._contexts:
            device = ctypes.c_int()
            self._check("cuDeviceGet", self.lib.cuDeviceGet(ctypes.byref(device), ordinal))
            context = ctypes.c_void_p()
            self._check("cuDevicePrimaryCtxRetain", self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device))
            self._contexts[ordinal] = context
        self._check("cuCtxSetCurrent", self.lib.cuCtxSetCurrent(self._contexts[ordinal]))

    def import_handle(self, fd):
        handle = ctypes.c_ulonglong()
        # for POSIX fds the "handle" argument is the fd itself, as a pointer-sized value
        self._check(
            "cuMemImportFromShareableHandle",
            self.lib.cuMemImportFromShareableHandle(
                ctypes.byref(handle), ctypes.c_void_p(fd), _CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            ),
        )
        return handle.value

    def granularity(self, ordinal):
        prop = _CUmemAllocationProp()
        prop.type = _CU_MEM_ALLOCATION_TYPE_PINNED
        prop.requestedHandleTypes = _CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        prop.location = _CUmemLocation(_CU_MEM_LOCATION_TYPE_DEVICE, ordinal)
        g = ctypes.c_size_t()
        self._check(
            "cuMemGetAllocationGranularity",
            self.lib.cuMemGetAllocationGranularity(ctypes.byref(g), ctypes.byref(prop), 0),
        )
        return g.value

    def reserve(self, size):
        address = ctypes.c_ulonglong()
        self._check("cuMemAddressReserve", self.lib.cuMemAddressReserve(ctypes.byref(address), size, 0, 0, 0))
        return address.value

    def map(self, address, size, handle):
        self._check("cuMemMap", self.lib.cuMemMap(address, size, 0, handle, 0))

    def release(self, handle):
        self._check("cuMemRelease", self.lib.cuMemRelease(handle))

    def set_read_only(self, address, size, ordinal):
        access = _CUmemAccessDesc(_CUmemLocation(_CU_MEM_LOCATION_TYPE_DEVICE, ordinal), _CU_MEM_ACCESS_FLAGS_PROT_READ)
        self._check("cuMemSetAccess", self.lib.cuMemSetAccess(address, size, ctypes.byref(access), 1))

    def unmap(self, address, size):
        self._check("cuMemUnmap", self.lib.cuMemUnmap(address, size))

    def free(self, address, size):
        self._check("cuMemAddressFree", self.lib.cuMemAddressFree(address, size))

    def as_tensor(self, view, device):
        """A torch tensor over view.__cuda_array_interface__ on device; torch
        keeps view alive as long as the tensor's storage."""
        import torch

        return torch.as_tensor(view, device=device)


class _CudaView:
    """One tensor of a CUDA mapping in the CUDA Array Interface (version 3)."""

    def __init__(self, address, shape, typestr):
        self.__cuda_array_interface__ = {
            "version": 3,
            "shape": shape,
            "typestr": typestr,
            "data": (address if all(shape) else 0, True),  # read-only
            "strides": None,
            "stream": None,  # the server synchronized every copy before the hand-out
        }


class _CudaMapping:
    """The imported allocation mapped read-only at base..base+size."""

    def __init__(self, driver, fd, ordinal, nbytes, mapped_bytes):
        self.driver, self.ordinal, self.base = driver, ordinal, None
        driver.make_current(ordinal)
        if _is_count(mapped_bytes) and mapped_bytes >= nbytes and mapped_bytes > 0:
            self.size = mapped_bytes
        else:
            g = driver.granularity(ordinal)
            self.size = max(g, (nbytes + g - 1) // g * g)
        handle = driver.import_handle(fd)
        try:
            base = driver.reserve(self.size)
            try:
                driver.map(base, self.size, handle)
                try:
                    driver.set_read_only(base, self.size, ordinal)
                except BaseException:
                    driver.unmap(base, self.size)
                    raise
            except BaseException:
                driver.free(base, self.size)
                raise
        finally:
            # the mapping holds the memory now (or nothing does)
            driver.release(handle)
        self.base = base

    def close(self):
        if self.base is not None:
            base, self.base = self.base, None
            self.driver.make_current(self.ordinal)
            try:
                self.driver.unmap(base, self.size)
            finally:
                self.driver.free(base, self.size)


# safetensors dtype -> (typestr of the CUDA Array Interface, torch dtype attribute
# to bit-cast to, or None). BF16 and FP8 have no typestr: same-width ints, then view().
_CUDA_TYPESTR = {
    "F64": ("<f8", None),
    "F32": ("<f4", None),
    "F16": ("<f2", None),
    "BF16": ("<i2", "bfloat16"),
    "I64": ("<i8", None),
    "I32": ("<i4", None),
    "I16": ("<i2", None),
    "I8": ("|i1", None),
    "U8": ("|u1", None),
    "BOOL": ("|b1", None),
    "C64": ("<c8", None),
    "U16": ("<i2", "uint16"),
    "U32": ("<i4", "uint32"),
    "U64": ("<i8", "uint64"),
    "F8_E4M3": ("|i1", "float8_e4m3fn"),
    "F8_E5M2": ("|i1", "float8_e5m2"),
}

# the unsigned integer of each width: a raw NumPy view of a dtype NumPy lacks
_RAW = {8: "u1", 16: "<u2", 32: "<u4", 64: "<u8"}


# ---------------------------------------------------------------- the public object


class Preload:
    """A leased preload; see the module's documentation. Prefer attach()."""

    def __init__(
        self,
        socket_path,
        preload_id,
        token=None,
        *,
        timeout=30.0,
        cuda_driver=None,
        cuda_device=None,
        fault_handler=True,
    ):
        if sys.byteorder != "little":
            raise PreloadError("protocol_error", "preloads hold little-endian bytes; this host is big-endian")
        if token is None:
            token = os.environ.get("TENSORGATE_TOKEN", "")
        if not isinstance(token, str) or not isinstance(preload_id, str):
            raise TypeError("tensorgate: the token and the preload id are strings")
        if fault_handler and not faulthandler.is_enabled():
            try:
                faulthandler.enable()
            except (RuntimeError, ValueError, OSError, AttributeError):
                pass  # no usable stderr (sys.stderr None, a notebook's stream): nothing to write to
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lease = _Lease(sock)
        try:
            sock.settimeout(timeout)
            try:
                sock.connect(os.fspath(socket_path))
                sock.sendall(json.dumps({"token": token, "preload": preload_id}).encode() + b"\n")
                line, fds = _receive(sock)
            except PreloadError:
                raise
            except OSError as e:
                raise PreloadError("connection_failed", f"the preload socket {socket_path}: {e}") from None
            for extra in fds[1:]:
                os.close(extra)
            if fds:
                lease.fd = fds[0]
            reply = _parse(line)
            if lease.fd < 0:
                raise PreloadError("protocol_error", "the server sent no file descriptor with the layout")
            sock.settimeout(None)
            self.id = reply.get("preload", preload_id)
            self.model = reply.get("model")
            self.version = reply.get("version")
            self.device = reply["device"]
            self.backend = reply.get("backend")
            self.bytes = reply["bytes"]
            self.reply = reply
            self._tensors = {t.name: t for t in reply["layout"]}
            self._ordinal = None
            self._driver = None
            if self.device.startswith("cuda:"):
                try:
                    self._ordinal = int(self.device[5:])
                except ValueError:
                    raise PreloadError("protocol_error", f"the device {self.device!r} is not cuda:N") from None
                if cuda_device is not None:
                    self._ordinal = int(cuda_device)  # this process's number of the server's GPU
                self._driver = cuda_driver if cuda_driver is not None else CudaDriver()
                lease.cuda = _CudaMapping(self._driver, lease.fd, self._ordinal, self.bytes, reply.get("mapped_bytes"))
                # the mapping holds the memory: the descriptor is no longer needed
                os.close(lease.fd)
                lease.fd = -1
            elif self.device == "host" and reply.get("mappable", True):
                size = os.fstat(lease.fd).st_size
                if size < self.bytes:
                    raise PreloadError(
                        "lease_lost", f"the shared memory has {size} bytes, the layout says {self.bytes}"
                    )
                if self.bytes > 0:
                    try:
                        lease.memory = mmap.mmap(lease.fd, self.bytes, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
                    except OSError as e:
                        raise PreloadError("mapping_failed", f"mapping preload {self.id} read-only: {e}") from None
            else:
                raise PreloadError("protocol_error", f"this client cannot map a {self.device!r} preload")
        except BaseException:
            lease.end(quiet=True)
            raise
        self._lease = lease

    # ---- the layout

    def keys(self):
        """Tensor names, in allocation (offset) order."""
        return list(self._tensors)

    def __contains__(self, name):
        return name in self._tensors

    def __len__(self):
        return len(self._tensors)

    def __iter__(self):
        return iter(self._tensors)

    def info(self, name):
        """The TensorInfo of name; KeyError if the preload has no such tensor."""
        try:
            return self._tensors[name]
        except KeyError:
            raise KeyError(f"tensorgate: preload {self.id} has no tensor {name!r}") from None

    @property
    def fd(self):
        """The allocation's descriptor (host preloads; -1 once closed or for CUDA)."""
        return self._lease.fd

    @property
    def closed(self):
        return self._lease.sock is None

    @property
    def views(self):
        """How many arrays/tensors made here are alive (with what derives from them)."""
        return self._lease.live

    def _open_lease(self):
        if self._lease.sock is None or self._lease.deferred:
            raise PreloadError("lease_ended", f"the lease on preload {self.id} has ended (close() was called)")
        return self._lease

    def _host_bytes(self, info):
        lease = self._open_lease()
        if lease.memory is None:
            raise TypeError(f"tensorgate: preload {self.id} is on {self.device}: use .torch(name)")
        return memoryview(lease.memory)[info.offset : info.offset + info.bytes]

    # ---- views

    def numpy(self, name, raw=False):
        """A read-only NumPy array over the tensor's bytes in the mapping (no copy).
        NumPy has no BF16/FP8/F4/F6 dtype: those raise TypeError, unless raw=True,
        which gives the bits as unsigned integers of the dtype's width (uint16 for
        BF16, uint8 for FP8; flat uint8 bytes for the packed F4/F6)."""
        info = self.info(name)
        bits, code = DTYPES[info.dtype]
        shape = info.shape
        if raw and bits in _RAW:
            dtype = np.dtype(_RAW[bits])
        elif raw:
            dtype, shape = np.dtype("u1"), (info.bytes,)
        elif code is None:
            how = f"its bits as {np.dtype(_RAW[bits]).name}" if bits in _RAW else "its packed bytes as uint8"
            raise TypeError(
                f"tensorgate: NumPy has no {info.dtype} dtype (tensor {name!r}); use .torch(name), "
                f'.numpy(name, raw=True) for {how}, or preload with "dtype":"F32"'
            )
        else:
            dtype = np.dtype(code)
        buf = self._host_bytes(info)
        if info.bytes == 0:
            empty = np.empty(shape, dtype)  # nothing to view: no buffer held
            empty.flags.writeable = False
            return empty
        flat = np.frombuffer(buf, dtype=dtype)
        # numpy's base buffer lives as long as this array and all derived from it
        self._lease.track(flat.base if flat.base is not None else buf)
        return flat.reshape(shape)

    def torch(self, name):
        """A torch tensor over the tensor's memory (no copy): on the CPU for a
        host preload, on cuda:N for a CUDA one. Do not write to it (see the
        module's documentation); clone() what you modify."""
        import torch

        from ._dtypes import torch_dtype

        info = self.info(name)
        try:
            dtype = torch_dtype(info.dtype)
        except TypeError:
            raise TypeError(
                f"tensorgate: torch {torch.__version__} has no {info.dtype} dtype (tensor {name!r}); "
                f'use .numpy(name, raw=True) for its bits, or preload with "dtype":"F32"'
            ) from None
        if self._driver is not None:
            return self._cuda_tensor(info, torch)
        buf = self._host_bytes(info)
        if info.bytes == 0:
            return torch.empty(info.shape, dtype=dtype)
        with warnings.catch_warnings():
            # the buffer is read-only on purpose; torch has no read-only tensors
            warnings.filterwarnings("ignore", message="The given buffer is not writable")
            t = torch.frombuffer(buf, dtype=dtype)
        self._lease.track(buf)  # torch's storage holds buf
        return t.reshape(info.shape)

    def _cuda_tensor(self, info, torch):
        lease = self._open_lease()
        typestr, cast = _CUDA_TYPESTR.get(info.dtype, (None, None))
        if typestr is None or (cast is not None and not hasattr(torch, cast)):
            raise TypeError(f"tensorgate: torch {torch.__version__} cannot show {info.dtype} tensor {info.name!r}")
        view = _CudaView(lease.cuda.base + info.offset, info.shape, typestr)
        t = self._driver.as_tensor(view, f"cuda:{self._ordinal}")
        if info.bytes:
            lease.track(view)
        return t.view(getattr(torch, cast)) if cast else t

    # ---- the lease

    def check(self):
        """Raises PreloadError("lease_lost") when the lease no longer holds: the
        server closed the connection (it stopped, or ended the lease), or the
        shared memory was taken back (0 bytes). Views must not be touched then."""
        lease = self._open_lease()
        ready = select.poll()
        ready.register(lease.sock, select.POLLIN | select.POLLHUP | select.POLLERR)
        for _fd, events in ready.poll(0):
            if events & (select.POLLHUP | select.POLLERR):
                raise PreloadError("lease_lost", f"the server ended the lease on preload {self.id}")
            try:
                if lease.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                    raise PreloadError("lease_lost", f"the server closed the lease on preload {self.id}")
            except (BlockingIOError, InterruptedError):
                pass
            except OSError as e:
                raise PreloadError("lease_lost", f"the lease on preload {self.id}: {e}") from None
        if lease.fd >= 0 and os.fstat(lease.fd).st_size < self.bytes:
            raise PreloadError("lease_lost", f"the server took back the memory of preload {self.id}")

    def close(self):
        """Ends the lease: unmaps and closes the connection. Raises PreloadInUse
        (and keeps everything) while arrays or tensors over the memory are alive.
        A second close() does nothing."""
        lease = self._lease
        if lease.sock is None:
            return
        with lease.lock:
            live = lease.live
        if live:
            raise PreloadInUse(
                f"{live} array(s)/tensor(s) over preload {self.id} are still alive; delete them "
                "(or copy what you need) before close()"
            )
        lease.end()

    def _release_later(self):
        """Ends the lease now if no view is alive, else when the last one goes."""
        lease = self._lease
        if lease.sock is None:
            return
        with lease.lock:
            if lease.live:
                lease.deferred = True
                return
        lease.end(quiet=True)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        if kind is None:
            self.close()
        else:
            self._release_later()  # do not hide the exception in flight
        return False

    def __del__(self):
        if getattr(self, "_lease", None) is not None:
            self._release_later()

    def __repr__(self):
        state = "closed" if self.closed else f"{self.views} view(s)"
        return f"<tensorgate Preload {self.id} {self.device} {self.bytes} bytes, {len(self)} tensors, {state}>"


def attach(socket_path, preload_id, token=None, **options):
    """Takes a lease on preload_id over the hand-off socket at socket_path (the
    server's --preload-socket, default DATA/preload.sock) with token (read scope
    on the model's namespace; default $TENSORGATE_TOKEN). Returns a Preload, a
    context manager. options: timeout (seconds for the hand-off, 30),
    cuda_driver (a CudaDriver or a substitute), cuda_device (this process's
    ordinal of the preload's GPU when its CUDA_VISIBLE_DEVICES numbers devices
    unlike the server's; default the N of "cuda:N"), fault_handler (True)."""
    return Preload(socket_path, preload_id, token, **options)
