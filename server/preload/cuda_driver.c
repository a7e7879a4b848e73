/* The CUDA driver function table: dlopen, dlsym, and error sentences. */
#include "cuda_driver.h"

#ifdef TG_HAVE_CUDA_H

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* Where each entry point lands in the table. The symbol is the exact ABI the
 * field's type matches: cuda.h maps cuDeviceTotalMem to cuDeviceTotalMem_v2 and
 * so on, and an older symbol of the same name has a different signature. */
typedef struct driver_symbol {
    const char *symbol;
    size_t field; /* offsetof(tg_cuda_driver, ...) */
} driver_symbol;

#define DRIVER_SYMBOL(name, field_name)                                                            \
    {                                                                                              \
        name, offsetof(tg_cuda_driver, field_name)                                                 \
    }

static const driver_symbol driver_symbols[] = {
    DRIVER_SYMBOL("cuGetErrorName", get_error_name),
    DRIVER_SYMBOL("cuGetErrorString", get_error_string),
    DRIVER_SYMBOL("cuInit", init),
    DRIVER_SYMBOL("cuDriverGetVersion", driver_get_version),
    DRIVER_SYMBOL("cuDeviceGetCount", device_get_count),
    DRIVER_SYMBOL("cuDeviceGet", device_get),
    DRIVER_SYMBOL("cuDeviceGetName", device_get_name),
    DRIVER_SYMBOL("cuDeviceGetUuid_v2", device_get_uuid),
    DRIVER_SYMBOL("cuDeviceTotalMem_v2", device_total_mem),
    DRIVER_SYMBOL("cuDeviceGetAttribute", device_get_attribute),
    DRIVER_SYMBOL("cuDevicePrimaryCtxRetain", primary_ctx_retain),
    DRIVER_SYMBOL("cuDevicePrimaryCtxRelease_v2", primary_ctx_release),
    DRIVER_SYMBOL("cuCtxSetCurrent", ctx_set_current),
    DRIVER_SYMBOL("cuMemGetAllocationGranularity", mem_get_allocation_granularity),
    DRIVER_SYMBOL("cuMemCreate", mem_create),
    DRIVER_SYMBOL("cuMemRelease", mem_release),
    DRIVER_SYMBOL("cuMemAddressReserve", mem_address_reserve),
    DRIVER_SYMBOL("cuMemAddressFree", mem_address_free),
    DRIVER_SYMBOL("cuMemMap", mem_map),
    DRIVER_SYMBOL("cuMemUnmap", mem_unmap),
    DRIVER_SYMBOL("cuMemSetAccess", mem_set_access),
    DRIVER_SYMBOL("cuMemExportToShareableHandle", mem_export_to_shareable_handle),
    DRIVER_SYMBOL("cuMemHostAlloc", mem_host_alloc),
    DRIVER_SYMBOL("cuMemFreeHost", mem_free_host),
    DRIVER_SYMBOL("cuStreamCreate", stream_create),
    DRIVER_SYMBOL("cuStreamDestroy_v2", stream_destroy),
    DRIVER_SYMBOL("cuStreamSynchronize", stream_synchronize),
    DRIVER_SYMBOL("cuMemcpyHtoDAsync_v2", memcpy_htod_async),
};

int tg_cuda_driver_load(tg_cuda_driver *driver, const char *library_path, char *why, size_t why_len)
{
    memset(driver, 0, sizeof *driver);
    void *library = dlopen(library_path, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *text = dlerror();
        snprintf(why, why_len, "cannot load the CUDA driver: %s", text ? text : library_path);
        return -1;
    }
    for (size_t i = 0; i < sizeof driver_symbols / sizeof driver_symbols[0]; i++) {
        dlerror();
        void *address = dlsym(library, driver_symbols[i].symbol);
        if (address == NULL) {
            snprintf(why, why_len,
                     "the CUDA driver %s has no %s (a driver older than CUDA 11.4 lacks the "
                     "virtual memory and UUID entry points tensorgate needs)",
                     library_path, driver_symbols[i].symbol);
            dlclose(library);
            memset(driver, 0, sizeof *driver);
            return -1;
        }
        /* POSIX guarantees a data pointer from dlsym converts to a function pointer of
         * the same size; each field is a function pointer of the symbol's real type. */
        memcpy((char *)driver + driver_symbols[i].field, &address, sizeof address);
    }
    driver->library = library;
    return 0;
}

void tg_cuda_driver_unload(tg_cuda_driver *driver)
{
    if (driver->library != NULL)
        dlclose(driver->library);
    memset(driver, 0, sizeof *driver);
}

/* Names and texts of the errors the backend meets most, as the driver spells them,
 * for a driver that cannot name its own errors (the stub library). */
typedef struct known_error {
    CUresult result;
    const char *name;
    const char *text;
} known_error;

static const known_error known_errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY",
     "CUDA driver is a stub library (the toolkit's libcuda.so, not the NVIDIA driver's)"},
    {CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE",
     "CUDA-capable device(s) is/are busy or unavailable"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM",
     "OS call failed or operation not supported on this OS"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
     "system has unsupported display driver / cuda driver combination"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static const known_error *known_error_find(CUresult result)
{
    for (size_t i = 0; i < sizeof known_errors / sizeof known_errors[0]; i++)
        if (known_errors[i].result == result)
            return &known_errors[i];
    return NULL;
}

const char *tg_cuda_driver_error_name(const tg_cuda_driver *driver, CUresult result)
{
    const char *name = NULL;
    if (driver != NULL && driver->get_error_name != NULL &&
        driver->get_error_name(result, &name) == CUDA_SUCCESS && name != NULL)
        return name;
    const known_error *known = known_error_find(result);
    return known ? known->name : NULL;
}

void tg_cuda_driver_describe(const tg_cuda_driver *driver, const char *call, CUresult result,
                             char *out, size_t out_len)
{
    const char *name = tg_cuda_driver_error_name(driver, result);
    const char *text = NULL;
    if (driver != NULL && driver->get_error_string != NULL &&
        (driver->get_error_string(result, &text) != CUDA_SUCCESS || text == NULL))
        text = NULL;
    if (text == NULL) {
        const known_error *known = known_error_find(result);
        text = known ? known->text : NULL;
    }
    if (name != NULL && text != NULL)
        snprintf(out, out_len, "%s: %s: %s", call, name, text);
    else if (name != NULL)
        snprintf(out, out_len, "%s: %s", call, name);
    else
        snprintf(out, out_len, "%s: CUDA error %d", call, (int)result);
}

#else

/* Without cuda.h there is no table to fill: the CUDA backend reports itself
 * unavailable instead (preload_cuda.c). This keeps the translation unit non-empty. */
typedef int tg_cuda_driver_unavailable;

#endif
