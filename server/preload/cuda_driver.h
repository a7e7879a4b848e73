/* The CUDA driver API as a typed table of function pointers, filled at run time
 * with dlopen("libcuda.so.1") + dlsym, so the tensorgate binary never links
 * libcuda and runs the same with or without a GPU (docs/DESIGN.md §1, §6).
 *
 * The table is a plain struct so a test can fill it with its own functions (a
 * fake driver) and exercise the CUDA backend without a GPU. The types come from
 * the CUDA Toolkit's cuda.h; without it (TG_HAVE_CUDA_H undefined) only the
 * sentence saying so is available and the CUDA backend reports no devices. */
#ifndef TG_CUDA_DRIVER_H
#define TG_CUDA_DRIVER_H

#include <stddef.h>

/* The library the CUDA backend loads: the driver's versioned soname, which the
 * NVIDIA driver package installs (the unversioned libcuda.so is a dev symlink or
 * the toolkit's stub). */
#define TG_CUDA_DRIVER_LIBRARY "libcuda.so.1"

#ifdef TG_HAVE_CUDA_H
#include <cuda.h>

/* Each field is the driver entry point named in the comment (the exact symbol
 * dlsym resolves: the _v2 ABI where cuda.h maps the plain name to one). */
typedef struct tg_cuda_driver {
    void *library; /* the dlopen handle; NULL for a table filled by hand */

    CUresult (*get_error_name)(CUresult error, const char **name);     /* cuGetErrorName */
    CUresult (*get_error_string)(CUresult error, const char **text);   /* cuGetErrorString */
    CUresult (*init)(unsigned int flags);                              /* cuInit */
    CUresult (*driver_get_version)(int *version);                      /* cuDriverGetVersion */
    CUresult (*device_get_count)(int *count);                          /* cuDeviceGetCount */
    CUresult (*device_get)(CUdevice *device, int ordinal);             /* cuDeviceGet */
    CUresult (*device_get_name)(char *name, int len, CUdevice device); /* cuDeviceGetName */
    CUresult (*device_get_uuid)(CUuuid *uuid, CUdevice device);        /* cuDeviceGetUuid_v2 */
    CUresult (*device_total_mem)(size_t *bytes, CUdevice device);      /* cuDeviceTotalMem_v2 */
    CUresult (*device_get_attribute)(int *value, CUdevice_attribute attribute,
                                     CUdevice device); /* cuDeviceGetAttribute */
    CUresult (*primary_ctx_retain)(CUcontext *context,
                                   CUdevice device);  /* cuDevicePrimaryCtxRetain */
    CUresult (*primary_ctx_release)(CUdevice device); /* cuDevicePrimaryCtxRelease_v2 */
    CUresult (*ctx_set_current)(CUcontext context);   /* cuCtxSetCurrent */
    CUresult (*mem_get_allocation_granularity)(
        size_t *granularity, const CUmemAllocationProp *prop,
        CUmemAllocationGranularity_flags option); /* cuMemGetAllocationGranularity */
    CUresult (*mem_create)(CUmemGenericAllocationHandle *handle, size_t size,
                           const CUmemAllocationProp *prop,
                           unsigned long long flags);             /* cuMemCreate */
    CUresult (*mem_release)(CUmemGenericAllocationHandle handle); /* cuMemRelease */
    CUresult (*mem_address_reserve)(CUdeviceptr *address, size_t size, size_t alignment,
                                    CUdeviceptr hint,
                                    unsigned long long flags);      /* cuMemAddressReserve */
    CUresult (*mem_address_free)(CUdeviceptr address, size_t size); /* cuMemAddressFree */
    CUresult (*mem_map)(CUdeviceptr address, size_t size, size_t offset,
                        CUmemGenericAllocationHandle handle,
                        unsigned long long flags);           /* cuMemMap */
    CUresult (*mem_unmap)(CUdeviceptr address, size_t size); /* cuMemUnmap */
    CUresult (*mem_set_access)(CUdeviceptr address, size_t size, const CUmemAccessDesc *desc,
                               size_t count); /* cuMemSetAccess */
    CUresult (*mem_export_to_shareable_handle)(
        void *shareable_handle, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type,
        unsigned long long flags); /* cuMemExportToShareableHandle */
    CUresult (*mem_host_alloc)(void **pointer, size_t bytes,
                               unsigned int flags);                  /* cuMemHostAlloc */
    CUresult (*mem_free_host)(void *pointer);                        /* cuMemFreeHost */
    CUresult (*stream_create)(CUstream *stream, unsigned int flags); /* cuStreamCreate */
    CUresult (*stream_destroy)(CUstream stream);                     /* cuStreamDestroy_v2 */
    CUresult (*stream_synchronize)(CUstream stream);                 /* cuStreamSynchronize */
    CUresult (*memcpy_htod_async)(CUdeviceptr destination, const void *source, size_t bytes,
                                  CUstream stream); /* cuMemcpyHtoDAsync_v2 */
} tg_cuda_driver;

/* Loads library_path (TG_CUDA_DRIVER_LIBRARY in the server) with
 * RTLD_NOW|RTLD_LOCAL and resolves every entry point. Returns 0, or -1 with why
 * filled with one sentence (the dlerror text, or the missing symbol) and *driver
 * zeroed. Does not call cuInit. */
int tg_cuda_driver_load(tg_cuda_driver *driver, const char *library_path, char *why,
                        size_t why_len);
/* dlcloses the library if the table has one; zeroes the table. */
void tg_cuda_driver_unload(tg_cuda_driver *driver);

/* One sentence for a failed call: "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY: out of
 * memory". The driver's own names are used when it gives them; a driver that
 * cannot (the toolkit's stub library answers every call with
 * CUDA_ERROR_STUB_LIBRARY) falls back to a built-in table, then to the number. */
void tg_cuda_driver_describe(const tg_cuda_driver *driver, const char *call, CUresult result,
                             char *out, size_t out_len);

/* The driver's name for result ("CUDA_ERROR_OUT_OF_MEMORY"), from the driver or the
 * built-in table; NULL when neither knows it. */
const char *tg_cuda_driver_error_name(const tg_cuda_driver *driver, CUresult result);

#endif /* TG_HAVE_CUDA_H */

#endif
