#!/usr/bin/env python3
"""Use a tensorgate CUDA preload from PyTorch without copying it.

tensorgate placed the tensors of a model version in one CUDA allocation
(POST /v1/preloads {"device":"cuda:0", ...}). This colocated consumer:

1. connects to the preload unix socket and sends one JSON line
   {"token": "...", "preload": "<id>"};
2. receives one JSON line (the layout: device, bytes, mapped_bytes and per tensor
   name, dtype, shape, offset) with the allocation's POSIX file descriptor
   attached by SCM_RIGHTS (socket.recv_fds, Python 3.9+);
3. imports the fd with the CUDA driver API through ctypes
   (cuMemImportFromShareableHandle, cuMemAddressReserve, cuMemMap,
   cuMemSetAccess) into this process's primary context of that device, the one
   PyTorch uses;
4. exposes each tensor through __cuda_array_interface__, so
   torch.as_tensor(view, device="cuda:N") wraps the memory without a copy.

The connection is the lease: while it is open the server keeps the preload.
The mapping (and the connection) stay alive while any tensor made from it does:
every view holds a reference to the mapping and torch holds a reference to the
view for the tensor's life.

BF16 (and FP8) have no typestr in the array interface: they are exposed as
int16 (int8) and reinterpreted with Tensor.view(torch.bfloat16), a free
bit-cast. Unsigned 16/32/64-bit integers are exposed as the signed type of the
same width on PyTorch versions without torch.uint16/32/64.

The memory is mapped read-only (CU_MEM_ACCESS_FLAGS_PROT_READ): other processes
share it, and a write from a kernel faults instead of corrupting their weights.
Clone a tensor to modify it.

Usage:
  examples/cuda_torch.py --socket /run/tensorgate/preload.sock \
      --token "$TOKEN" --preload 0123456789abcdef [--print 4]
"""

import argparse
import ctypes
import json
import os
import socket
import sys

# cuda.h values (stable ABI).
CUDA_SUCCESS = 0
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1
CU_MEM_ALLOCATION_TYPE_PINNED = 0x1
CU_MEM_LOCATION_TYPE_DEVICE = 0x1
CU_MEM_ACCESS_FLAGS_PROT_READ = 0x1
CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0

CUdeviceptr = ctypes.c_ulonglong
CUmemGenericAllocationHandle = ctypes.c_ulonglong


class CUmemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class CUmemAllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class CUmemAllocationProp(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", CUmemLocation),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", CUmemAllocFlags),
    ]


class CUmemAccessDesc(ctypes.Structure):
    _fields_ = [("location", CUmemLocation), ("flags", ctypes.c_int)]


class Driver:
    """The few driver entry points this consumer needs, checked on every call."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        for name in (
            "cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain", "cuCtxSetCurrent",
            "cuMemImportFromShareableHandle", "cuMemGetAllocationGranularity",
            "cuMemAddressReserve", "cuMemAddressFree", "cuMemMap", "cuMemUnmap",
            "cuMemSetAccess", "cuMemRelease", "cuGetErrorName",
        ):
            getattr(self.lib, name).restype = ctypes.c_int
        self.lib.cuMemImportFromShareableHandle.argtypes = [
            ctypes.POINTER(CUmemGenericAllocationHandle), ctypes.c_void_p, ctypes.c_int]
        self.lib.cuMemAddressReserve.argtypes = [
            ctypes.POINTER(CUdeviceptr), ctypes.c_size_t, ctypes.c_size_t, CUdeviceptr,
            ctypes.c_ulonglong]
        self.lib.cuMemAddressFree.argtypes = [CUdeviceptr, ctypes.c_size_t]
        self.lib.cuMemMap.argtypes = [
            CUdeviceptr, ctypes.c_size_t, ctypes.c_size_t, CUmemGenericAllocationHandle,
            ctypes.c_ulonglong]
        self.lib.cuMemUnmap.argtypes = [CUdeviceptr, ctypes.c_size_t]
        self.lib.cuMemSetAccess.argtypes = [
            CUdeviceptr, ctypes.c_size_t, ctypes.POINTER(CUmemAccessDesc), ctypes.c_size_t]
        self.lib.cuMemRelease.argtypes = [CUmemGenericAllocationHandle]
        self.check("cuInit", self.lib.cuInit(0))

    def check(self, call, result):
        if result != CUDA_SUCCESS:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(result, ctypes.byref(name))
            text = name.value.decode() if name.value else "CUDA error %d" % result
            raise RuntimeError("%s: %s" % (call, text))

    def make_current(self, ordinal):
        """Makes the device's primary context (PyTorch's) current in this thread."""
        device = ctypes.c_int()
        self.check("cuDeviceGet", self.lib.cuDeviceGet(ctypes.byref(device), ordinal))
        context = ctypes.c_void_p()
        self.check("cuDevicePrimaryCtxRetain",
                   self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device))
        self.check("cuCtxSetCurrent", self.lib.cuCtxSetCurrent(context))


def receive_layout(path, token, preload):
    """Sends the request line; returns (connection, layout dict, fd)."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(path)
    connection.sendall((json.dumps({"token": token, "preload": preload}) + "\n").encode())
    data, fds = b"", []
    while not data.endswith(b"\n"):
        chunk, chunk_fds, _flags, _address = socket.recv_fds(connection, 1 << 20, 1)
        if not chunk:
            raise RuntimeError("the server closed the connection before the layout line")
        data += chunk
        fds += chunk_fds
    reply = json.loads(data)
    if "error" in reply:
        for fd in fds:
            os.close(fd)
        raise RuntimeError("%s: %s" % (reply["error"], reply.get("detail", "")))
    if len(fds) != 1:
        raise RuntimeError("expected one file descriptor with the layout, got %d" % len(fds))
    return connection, reply, fds[0]


class PreloadMapping:
    """The allocation mapped read-only into this process. Unmapped (and the lease
    ended) when the last tensor made from it is gone, or at close()."""

    def __init__(self, driver, connection, layout, fd):
        self.driver, self.connection = driver, connection
        self.device = layout["device"]  # "cuda:N"
        self.ordinal = int(self.device.split(":")[1])
        driver.make_current(self.ordinal)
        handle = CUmemGenericAllocationHandle()
        try:
            # For POSIX fds the handle argument is the fd itself, cast to a pointer.
            driver.check("cuMemImportFromShareableHandle",
                         driver.lib.cuMemImportFromShareableHandle(
                             ctypes.byref(handle), ctypes.c_void_p(fd),
                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        finally:
            os.close(fd)  # the imported handle holds the memory now
        self.size = int(layout.get("mapped_bytes") or self._rounded(layout["bytes"]))
        self.base = CUdeviceptr()
        driver.check("cuMemAddressReserve", driver.lib.cuMemAddressReserve(
            ctypes.byref(self.base), self.size, 0, 0, 0))
        driver.check("cuMemMap", driver.lib.cuMemMap(self.base, self.size, 0, handle, 0))
        # The mapping keeps the memory alive; the handle is no longer needed.
        driver.check("cuMemRelease", driver.lib.cuMemRelease(handle))
        access = CUmemAccessDesc(CUmemLocation(CU_MEM_LOCATION_TYPE_DEVICE, self.ordinal),
                                 CU_MEM_ACCESS_FLAGS_PROT_READ)
        driver.check("cuMemSetAccess", driver.lib.cuMemSetAccess(
            self.base, self.size, ctypes.byref(access), 1))

    def _rounded(self, nbytes):
        prop = CUmemAllocationProp()
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
        prop.location = CUmemLocation(CU_MEM_LOCATION_TYPE_DEVICE, self.ordinal)
        granularity = ctypes.c_size_t()
        self.driver.check("cuMemGetAllocationGranularity",
                          self.driver.lib.cuMemGetAllocationGranularity(
                              ctypes.byref(granularity), ctypes.byref(prop),
                              CU_MEM_ALLOC_GRANULARITY_MINIMUM))
        g = granularity.value
        return max(g, (nbytes + g - 1) // g * g)

    def close(self):
        if self.base is not None:
            self.driver.make_current(self.ordinal)
            self.driver.lib.cuMemUnmap(self.base, self.size)
            self.driver.lib.cuMemAddressFree(self.base, self.size)
            self.base = None
        if self.connection is not None:
            self.connection.close()  # ends the lease
            self.connection = None

    def __del__(self):
        self.close()


# safetensors dtype -> (typestr for __cuda_array_interface__, torch dtype to view as).
# None: the typestr's own dtype. BF16/FP8 have no typestr: same-width ints, then a
# bit-cast view.
def dtype_table(torch):
    table = {
        "F64": ("<f8", None), "F32": ("<f4", None), "F16": ("<f2", None),
        "BF16": ("<i2", torch.bfloat16),
        "I64": ("<i8", None), "I32": ("<i4", None), "I16": ("<i2", None), "I8": ("|i1", None),
        "U8": ("|u1", None), "BOOL": ("|b1", None), "C64": ("<c8", None),
        "U16": ("<i2", getattr(torch, "uint16", None)),
        "U32": ("<i4", getattr(torch, "uint32", None)),
        "U64": ("<i8", getattr(torch, "uint64", None)),
    }
    if hasattr(torch, "float8_e4m3fn"):
        table["F8_E4M3"] = ("|i1", torch.float8_e4m3fn)
        table["F8_E5M2"] = ("|i1", torch.float8_e5m2)
    return table


class TensorView:
    """One tensor of the mapping, in the CUDA Array Interface (version 3)."""

    def __init__(self, mapping, entry, typestr):
        self.mapping = mapping  # keeps the mapping alive as long as torch keeps us
        shape = tuple(int(d) for d in entry["shape"])
        empty = any(d == 0 for d in shape)
        address = 0 if empty else mapping.base.value + int(entry["offset"])
        self.__cuda_array_interface__ = {
            "version": 3,
            "shape": shape,
            "typestr": typestr,
            "data": (address, True),  # read-only
            "strides": None,  # C order
            # The server synchronized every copy before handing the fd out.
            "stream": None,
        }


def load(socket_path, token, preload):
    """Returns ({name: torch.Tensor on cuda:N}, mapping)."""
    import torch

    driver = Driver()
    connection, layout, fd = receive_layout(socket_path, token, preload)
    mapping = PreloadMapping(driver, connection, layout, fd)
    table = dtype_table(torch)
    tensors = {}
    for entry in layout.get("layout") or layout.get("tensors") or []:
        if entry["dtype"] not in table:
            raise RuntimeError("%s: dtype %s has no torch equivalent here"
                               % (entry["name"], entry["dtype"]))
        typestr, view_as = table[entry["dtype"]]
        tensor = torch.as_tensor(TensorView(mapping, entry, typestr), device=mapping.device)
        tensors[entry["name"]] = tensor.view(view_as) if view_as is not None else tensor
    return tensors, mapping


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--socket", required=True, help="the preload unix socket path")
    parser.add_argument("--token", default=os.environ.get("TENSORGATE_TOKEN", ""))
    parser.add_argument("--preload", required=True, help="the preload id")
    parser.add_argument("--print", type=int, default=3, help="values to print per tensor")
    args = parser.parse_args()
    tensors, mapping = load(args.socket, args.token, args.preload)
    for name, tensor in tensors.items():
        head = tensor.flatten()[: args.print].float().tolist() if tensor.numel() else []
        print("%s %s %s %s %s" % (name, str(tensor.dtype).replace("torch.", ""),
                                  list(tensor.shape), tensor.device, head))
    del tensors
    mapping.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
