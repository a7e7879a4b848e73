/* The "cuda" preload backend (docs/DESIGN.md §6): one CUDA VMM allocation per preload,
 * created shareable as a POSIX file descriptor, filled with cuMemcpyHtoDAsync on
 * a few streams per device, and handed to consumers as a new fd each time.
 *
 * The driver is reached only through the dlopen'd table of cuda_driver.h, so with
 * no driver (or no cuda.h at build time) the backend exists, has no devices and
 * says why in one sentence; the manager then answers 503 for cuda:N.
 *
 * Contexts: every device uses its primary context, retained on first use (not at
 * construction: a context costs device memory, and a server may never preload to
 * a GPU). Every entry point makes the device's context current in the calling
 * thread before any call that needs one, since the manager calls from many
 * threads. */
#include "preload_cuda.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

tg_device_backend *tg_preload_cuda_backend(void)
{
    return tg_preload_cuda_backend_from(TG_CUDA_DRIVER_LIBRARY);
}

#ifdef TG_HAVE_CUDA_H

typedef struct cuda_device {
    CUdevice device;
    /* Written once under setup_lock before ready is set (release); read after
     * ready is seen set (acquire), so no lock is needed on the copy path. */
    CUcontext context;
    CUstream streams[TG_PRELOAD_CUDA_STREAMS];
    size_t granularity; /* minimum allocation granularity with our properties */
    atomic_bool ready;
} cuda_device;

typedef struct cuda_backend {
    tg_device_backend backend; /* backend.context points back to this struct */
    tg_cuda_driver driver;
    bool initialized; /* cuInit succeeded */
    int device_count;
    cuda_device *devices;
    pthread_mutex_t setup_lock;
    char why[512]; /* "" while devices are available */
} cuda_backend;

/* What backend's tg_device_allocation.handle points to. */
typedef struct cuda_allocation {
    CUmemGenericAllocationHandle handle;
    CUdeviceptr base;
    size_t size; /* granularity-rounded: what was created, reserved and mapped */
} cuda_allocation;

static int fail(cuda_backend *cuda, const char *call, CUresult result, char *err, size_t err_len)
{
    tg_cuda_driver_describe(&cuda->driver, call, result, err, err_len);
    return -1;
}

static int fail_text(char *err, size_t err_len, const char *text)
{
    snprintf(err, err_len, "%s", text);
    return -1;
}

/* A memory location's id is the device ordinal, not the CUdevice handle. */
static void allocation_properties(int index, CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = index;
}

/* Checks a capability attribute; a device without it gets a sentence naming it. */
static int require_attribute(cuda_backend *cuda, int index, CUdevice_attribute attribute,
                             const char *what, char *err, size_t err_len)
{
    int value = 0;
    CUresult result =
        cuda->driver.device_get_attribute(&value, attribute, cuda->devices[index].device);
    if (result != CUDA_SUCCESS)
        return fail(cuda, "cuDeviceGetAttribute", result, err, err_len);
    if (value == 0) {
        snprintf(err, err_len, "cuda:%d does not support %s", index, what);
        return -1;
    }
    return 0;
}

/* Retains the primary context, checks VMM support, reads the granularity and creates
 * the streams, once per device. On failure nothing stays retained or created, and a
 * later call tries again. */
static int device_ready(cuda_backend *cuda, int index, char *err, size_t err_len)
{
    cuda_device *device = &cuda->devices[index];
    if (atomic_load_explicit(&device->ready, memory_order_acquire))
        return 0;
    pthread_mutex_lock(&cuda->setup_lock);
    int status = 0;
    if (atomic_load_explicit(&device->ready, memory_order_relaxed))
        goto done;
    status = -1;
    const tg_cuda_driver *driver = &cuda->driver;
    CUcontext context = NULL;
    CUresult result = driver->primary_ctx_retain(&context, device->device);
    if (result != CUDA_SUCCESS) {
        fail(cuda, "cuDevicePrimaryCtxRetain", result, err, err_len);
        goto done;
    }
    result = driver->ctx_set_current(context);
    if (result != CUDA_SUCCESS) {
        fail(cuda, "cuCtxSetCurrent", result, err, err_len);
        goto release_context;
    }
    if (require_attribute(cuda, index, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                          "CUDA virtual memory management (cuMemCreate)", err, err_len) != 0 ||
        require_attribute(
            cuda, index, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
            "POSIX file descriptor handles (cuMemExportToShareableHandle)", err, err_len) != 0)
        goto release_context;
    CUmemAllocationProp prop;
    allocation_properties(index, &prop);
    size_t granularity = 0;
    result = driver->mem_get_allocation_granularity(&granularity, &prop,
                                                    CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (result != CUDA_SUCCESS) {
        fail(cuda, "cuMemGetAllocationGranularity", result, err, err_len);
        goto release_context;
    }
    /* Rounding up relies on a power of two; every driver reports one (2 MiB today). */
    if (granularity == 0 || (granularity & (granularity - 1)) != 0) {
        snprintf(err, err_len, "cuMemGetAllocationGranularity: %zu is not a power of two",
                 granularity);
        goto release_context;
    }
    int created = 0;
    for (; created < TG_PRELOAD_CUDA_STREAMS; created++) {
        result = driver->stream_create(&device->streams[created], CU_STREAM_NON_BLOCKING);
        if (result != CUDA_SUCCESS) {
            fail(cuda, "cuStreamCreate", result, err, err_len);
            break;
        }
    }
    if (created < TG_PRELOAD_CUDA_STREAMS) {
        while (created > 0)
            driver->stream_destroy(device->streams[--created]);
        goto release_context;
    }
    device->context = context;
    device->granularity = granularity;
    atomic_store_explicit(&device->ready, true, memory_order_release);
    status = 0;
    goto done;
release_context:
    driver->primary_ctx_release(device->device);
done:
    pthread_mutex_unlock(&cuda->setup_lock);
    return status;
}

static int device_current(cuda_backend *cuda, int index, char *err, size_t err_len)
{
    CUresult result = cuda->driver.ctx_set_current(cuda->devices[index].context);
    return result == CUDA_SUCCESS ? 0 : fail(cuda, "cuCtxSetCurrent", result, err, err_len);
}

/* Waits for every stream of a ready device; the first failure is reported. */
static int device_synchronize(cuda_backend *cuda, int index, char *err, size_t err_len)
{
    if (device_current(cuda, index, err, err_len) != 0)
        return -1;
    int status = 0;
    for (int s = 0; s < TG_PRELOAD_CUDA_STREAMS; s++) {
        CUresult result = cuda->driver.stream_synchronize(cuda->devices[index].streams[s]);
        if (result != CUDA_SUCCESS && status == 0)
            status = fail(cuda, "cuStreamSynchronize", result, err, err_len);
    }
    return status;
}

static int device_index_valid(cuda_backend *cuda, int index, char *err, size_t err_len)
{
    if (cuda->device_count == 0)
        return fail_text(err, err_len, cuda->why);
    if (index < 0 || index >= cuda->device_count) {
        snprintf(err, err_len, "cuda:%d does not exist (this host has %d CUDA device%s)", index,
                 cuda->device_count, cuda->device_count == 1 ? "" : "s");
        return -1;
    }
    return 0;
}

static int cuda_device_count(void *context)
{
    return ((cuda_backend *)context)->device_count;
}

static const char *cuda_why_unavailable(void *context)
{
    return ((cuda_backend *)context)->why;
}

static int cuda_device_info(void *context, int index, tg_device_info *out)
{
    cuda_backend *cuda = context;
    char err[64];
    memset(out, 0, sizeof *out);
    if (device_index_valid(cuda, index, err, sizeof err) != 0)
        return -1;
    CUdevice device = cuda->devices[index].device;
    CUuuid uuid;
    size_t total = 0;
    if (cuda->driver.device_get_name(out->name, (int)sizeof out->name, device) != CUDA_SUCCESS ||
        cuda->driver.device_get_uuid(&uuid, device) != CUDA_SUCCESS ||
        cuda->driver.device_total_mem(&total, device) != CUDA_SUCCESS) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    out->name[sizeof out->name - 1] = '\0';
    const unsigned char *b = (const unsigned char *)uuid.bytes;
    /* The form nvidia-smi and CUDA_VISIBLE_DEVICES use. */
    snprintf(out->uuid, sizeof out->uuid,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
    out->total_bytes = total;
    return 0;
}

static int cuda_allocate(void *context, int index, uint64_t bytes, tg_device_allocation *out,
                         char *err, size_t err_len)
{
    cuda_backend *cuda = context;
    const tg_cuda_driver *driver = &cuda->driver;
    memset(out, 0, sizeof *out);
    if (device_index_valid(cuda, index, err, err_len) != 0 ||
        device_ready(cuda, index, err, err_len) != 0)
        return -1;
    cuda_device *device = &cuda->devices[index];
    /* An empty preload still gets one granule, so it has an fd to hand out. */
    uint64_t wanted = bytes == 0 ? 1 : bytes;
    uint64_t mask = (uint64_t)device->granularity - 1;
    uint64_t size = 0;
    size_t size_check = 0;
    if (__builtin_add_overflow(wanted, mask, &size) ||
        /* the rounded size must also fit the driver's size_t */
        __builtin_add_overflow(size & ~mask, 0, &size_check)) {
        snprintf(err, err_len, "cuda:%d: %" PRIu64 " bytes cannot be allocated", index, bytes);
        return -1;
    }
    size &= ~mask;
    cuda_allocation *allocation = calloc(1, sizeof *allocation);
    if (allocation == NULL)
        return fail_text(err, err_len, "out of host memory for the allocation's state");
    allocation->size = (size_t)size;
    if (device_current(cuda, index, err, err_len) != 0)
        goto free_state;

    CUmemAllocationProp prop;
    allocation_properties(index, &prop);
    CUresult result = driver->mem_create(&allocation->handle, allocation->size, &prop, 0);
    if (result != CUDA_SUCCESS) {
        fail(cuda, "cuMemCreate", result, err, err_len);
        goto free_state;
    }
    result =
        driver->mem_address_reserve(&allocation->base, allocation->size, device->granularity, 0, 0);
    if (result != CUDA_SUCCESS) {
        fail(cuda, "cuMemAddressReserve", result, err, err_len);
        goto release_handle;
    }
    result = driver->mem_map(allocation->base, allocation->size, 0, allocation->handle, 0);
    if (result != CUDA_SUCCESS) {
        fail(cuda, "cuMemMap", result, err, err_len);
        goto free_address;
    }
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = index;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    result = driver->mem_set_access(allocation->base, allocation->size, &access, 1);
    if (result != CUDA_SUCCESS) {
        fail(cuda, "cuMemSetAccess", result, err, err_len);
        goto unmap;
    }
    out->device = index;
    out->bytes = bytes;
    out->mapped_bytes = size;
    out->handle = allocation;
    return 0;

    /* Undo in the reverse order of create, reserve, map. */
unmap:
    driver->mem_unmap(allocation->base, allocation->size);
free_address:
    driver->mem_address_free(allocation->base, allocation->size);
release_handle:
    driver->mem_release(allocation->handle);
free_state:
    free(allocation);
    return -1;
}

static void cuda_release(void *context, tg_device_allocation *out)
{
    cuda_backend *cuda = context;
    cuda_allocation *allocation = out->handle;
    if (allocation == NULL)
        return;
    char err[256];
    /* Unmapping under a copy in flight is undefined: let the device's streams drain
     * first (they hold at most a few bounce buffers of other preloads). */
    device_synchronize(cuda, out->device, err, sizeof err);
    cuda->driver.mem_unmap(allocation->base, allocation->size);
    cuda->driver.mem_address_free(allocation->base, allocation->size);
    /* Consumers that imported an exported fd keep the memory alive past this. */
    cuda->driver.mem_release(allocation->handle);
    free(allocation);
    out->handle = NULL;
}

/* Bounce buffers are pinned in device 0's primary context with PORTABLE, so a
 * copy to any device treats them as page-locked. */
static void *cuda_host_buffer_alloc(void *context, size_t bytes)
{
    cuda_backend *cuda = context;
    char err[256];
    if (cuda->device_count == 0 || device_ready(cuda, 0, err, sizeof err) != 0 ||
        device_current(cuda, 0, err, sizeof err) != 0)
        return NULL;
    void *buffer = NULL;
    if (cuda->driver.mem_host_alloc(&buffer, bytes, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS)
        return NULL;
    return buffer;
}

static void cuda_host_buffer_free(void *context, void *buffer, size_t bytes)
{
    (void)bytes;
    cuda_backend *cuda = context;
    char err[256];
    if (buffer == NULL || device_current(cuda, 0, err, sizeof err) != 0)
        return;
    cuda->driver.mem_free_host(buffer);
}

static int cuda_copy(void *context, tg_device_allocation *out, uint64_t offset, const void *src,
                     size_t len, int stream, char *err, size_t err_len)
{
    cuda_backend *cuda = context;
    cuda_allocation *allocation = out->handle;
    if (allocation == NULL)
        return fail_text(err, err_len, "copy into an allocation that was released");
    if (stream < 0 || stream >= TG_PRELOAD_CUDA_STREAMS) {
        snprintf(err, err_len, "copy stream %d is not in 0..%d", stream,
                 TG_PRELOAD_CUDA_STREAMS - 1);
        return -1;
    }
    uint64_t end = 0;
    if (__builtin_add_overflow(offset, (uint64_t)len, &end) || end > out->bytes) {
        snprintf(err, err_len,
                 "copy of %zu bytes at offset %" PRIu64 " overruns the %" PRIu64 "-byte allocation",
                 len, offset, out->bytes);
        return -1;
    }
    if (device_current(cuda, out->device, err, err_len) != 0)
        return -1;
    CUresult result =
        cuda->driver.memcpy_htod_async(allocation->base + (CUdeviceptr)offset, src, len,
                                       cuda->devices[out->device].streams[stream]);
    return result == CUDA_SUCCESS ? 0 : fail(cuda, "cuMemcpyHtoDAsync", result, err, err_len);
}

/* wait() names a stream index, not a device: stream s of every device in use is
 * drained (an idle stream returns at once). */
static int cuda_wait(void *context, int stream, char *err, size_t err_len)
{
    cuda_backend *cuda = context;
    if (stream < 0 || stream >= TG_PRELOAD_CUDA_STREAMS) {
        snprintf(err, err_len, "copy stream %d is not in 0..%d", stream,
                 TG_PRELOAD_CUDA_STREAMS - 1);
        return -1;
    }
    int status = 0;
    for (int index = 0; index < cuda->device_count; index++) {
        cuda_device *device = &cuda->devices[index];
        if (!atomic_load_explicit(&device->ready, memory_order_acquire))
            continue;
        char local[256];
        if (device_current(cuda, index, local, sizeof local) == 0) {
            CUresult result = cuda->driver.stream_synchronize(device->streams[stream]);
            if (result == CUDA_SUCCESS)
                continue;
            fail(cuda, "cuStreamSynchronize", result, local, sizeof local);
        }
        if (status == 0) {
            snprintf(err, err_len, "%s", local);
            status = -1;
        }
    }
    return status;
}

/* Device memory cannot be sealed the way a memfd is: each importer chooses its own
 * access when it maps. finish() makes sure no copy is still in flight, so an fd
 * handed out afterwards names complete bytes. */
static int cuda_finish(void *context, tg_device_allocation *out, char *err, size_t err_len)
{
    cuda_backend *cuda = context;
    if (out->handle == NULL)
        return fail_text(err, err_len, "finish of an allocation that was released");
    return device_synchronize(cuda, out->device, err, err_len);
}

static int cuda_export_fd(void *context, tg_device_allocation *out, char *err, size_t err_len)
{
    cuda_backend *cuda = context;
    cuda_allocation *allocation = out->handle;
    if (allocation == NULL)
        return fail_text(err, err_len, "export of an allocation that was released");
    if (device_current(cuda, out->device, err, err_len) != 0)
        return -1;
    int fd = -1;
    CUresult result = cuda->driver.mem_export_to_shareable_handle(
        &fd, allocation->handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    if (result != CUDA_SUCCESS)
        return fail(cuda, "cuMemExportToShareableHandle", result, err, err_len);
    if (fd < 0)
        return fail_text(err, err_len, "cuMemExportToShareableHandle gave no file descriptor");
    return fd;
}

static void cuda_destroy(void *context)
{
    cuda_backend *cuda = context;
    for (int index = 0; index < cuda->device_count; index++) {
        cuda_device *device = &cuda->devices[index];
        if (!atomic_load_explicit(&device->ready, memory_order_acquire))
            continue;
        char err[256];
        device_synchronize(cuda, index, err, sizeof err);
        for (int s = 0; s < TG_PRELOAD_CUDA_STREAMS; s++)
            cuda->driver.stream_destroy(device->streams[s]);
        cuda->driver.primary_ctx_release(device->device);
    }
    /* Once cuInit has run, the driver has threads and atexit work of its own:
     * unloading it under them is a known crash, so it stays loaded. */
    if (!cuda->initialized)
        tg_cuda_driver_unload(&cuda->driver);
    pthread_mutex_destroy(&cuda->setup_lock);
    free(cuda->devices);
    free(cuda);
}

static cuda_backend *backend_new(void)
{
    cuda_backend *cuda = calloc(1, sizeof *cuda);
    if (cuda == NULL)
        return NULL;
    pthread_mutex_init(&cuda->setup_lock, NULL);
    tg_device_backend *backend = &cuda->backend;
    backend->kind = "cuda";
    backend->context = cuda;
    backend->device_count = cuda_device_count;
    backend->why_unavailable = cuda_why_unavailable;
    backend->device_info = cuda_device_info;
    backend->allocate = cuda_allocate;
    backend->release = cuda_release;
    backend->host_buffer_alloc = cuda_host_buffer_alloc;
    backend->host_buffer_free = cuda_host_buffer_free;
    backend->copy = cuda_copy;
    backend->wait = cuda_wait;
    backend->streams = TG_PRELOAD_CUDA_STREAMS;
    backend->finish = cuda_finish;
    backend->export_fd = cuda_export_fd;
    backend->destroy = cuda_destroy;
    return cuda;
}

/* cuInit and device enumeration; on failure device_count stays 0 and why says why.
 * Returns -1 only when host memory ran out. */
static int backend_start(cuda_backend *cuda)
{
    const tg_cuda_driver *driver = &cuda->driver;
    CUresult result = driver->init(0);
    if (result != CUDA_SUCCESS) {
        fail(cuda, "cuInit", result, cuda->why, sizeof cuda->why);
        return 0;
    }
    cuda->initialized = true;
    int count = 0;
    result = driver->device_get_count(&count);
    if (result != CUDA_SUCCESS) {
        fail(cuda, "cuDeviceGetCount", result, cuda->why, sizeof cuda->why);
        return 0;
    }
    if (count <= 0) {
        snprintf(cuda->why, sizeof cuda->why, "cuDeviceGetCount: the CUDA driver sees no device");
        return 0;
    }
    cuda->devices = calloc((size_t)count, sizeof *cuda->devices);
    if (cuda->devices == NULL)
        return -1;
    for (int index = 0; index < count; index++) {
        atomic_init(&cuda->devices[index].ready, false);
        result = driver->device_get(&cuda->devices[index].device, index);
        if (result != CUDA_SUCCESS) {
            fail(cuda, "cuDeviceGet", result, cuda->why, sizeof cuda->why);
            free(cuda->devices);
            cuda->devices = NULL;
            return 0;
        }
    }
    cuda->device_count = count;
    cuda->why[0] = '\0';
    return 0;
}

tg_device_backend *tg_preload_cuda_backend_with_driver(const tg_cuda_driver *driver)
{
    cuda_backend *cuda = backend_new();
    if (cuda == NULL)
        return NULL;
    cuda->driver = *driver;
    if (backend_start(cuda) != 0) {
        cuda_destroy(cuda);
        return NULL;
    }
    return &cuda->backend;
}

tg_device_backend *tg_preload_cuda_backend_from(const char *library_path)
{
    cuda_backend *cuda = backend_new();
    if (cuda == NULL)
        return NULL;
    if (tg_cuda_driver_load(&cuda->driver, library_path, cuda->why, sizeof cuda->why) != 0)
        return &cuda->backend;
    if (backend_start(cuda) != 0) {
        cuda_destroy(cuda);
        return NULL;
    }
    return &cuda->backend;
}

#else /* no cuda.h at build time: a backend with no devices that says so */

typedef struct cuda_backend {
    tg_device_backend backend;
    char why[256];
} cuda_backend;

static int cuda_device_count(void *context)
{
    (void)context;
    return 0;
}

static const char *cuda_why_unavailable(void *context)
{
    return ((cuda_backend *)context)->why;
}

static int cuda_device_info(void *context, int index, tg_device_info *out)
{
    (void)context;
    (void)index;
    memset(out, 0, sizeof *out);
    return -1;
}

static int cuda_allocate(void *context, int index, uint64_t bytes, tg_device_allocation *out,
                         char *err, size_t err_len)
{
    (void)index;
    (void)bytes;
    memset(out, 0, sizeof *out);
    snprintf(err, err_len, "%s", ((cuda_backend *)context)->why);
    return -1;
}

static void cuda_release(void *context, tg_device_allocation *allocation)
{
    (void)context;
    (void)allocation;
}

static void *cuda_host_buffer_alloc(void *context, size_t bytes)
{
    (void)context;
    (void)bytes;
    return NULL;
}

static void cuda_host_buffer_free(void *context, void *buffer, size_t bytes)
{
    (void)context;
    (void)buffer;
    (void)bytes;
}

static int cuda_copy(void *context, tg_device_allocation *allocation, uint64_t offset,
                     const void *src, size_t len, int stream, char *err, size_t err_len)
{
    (void)allocation;
    (void)offset;
    (void)src;
    (void)len;
    (void)stream;
    snprintf(err, err_len, "%s", ((cuda_backend *)context)->why);
    return -1;
}

static int cuda_wait(void *context, int stream, char *err, size_t err_len)
{
    (void)stream;
    snprintf(err, err_len, "%s", ((cuda_backend *)context)->why);
    return -1;
}

static int cuda_finish(void *context, tg_device_allocation *allocation, char *err, size_t err_len)
{
    (void)allocation;
    snprintf(err, err_len, "%s", ((cuda_backend *)context)->why);
    return -1;
}

static int cuda_export_fd(void *context, tg_device_allocation *allocation, char *err,
                          size_t err_len)
{
    (void)allocation;
    snprintf(err, err_len, "%s", ((cuda_backend *)context)->why);
    return -1;
}

static void cuda_destroy(void *context)
{
    free(context);
}

tg_device_backend *tg_preload_cuda_backend_from(const char *library_path)
{
    cuda_backend *cuda = calloc(1, sizeof *cuda);
    if (cuda == NULL)
        return NULL;
    snprintf(cuda->why, sizeof cuda->why,
             "tensorgate was built without the CUDA Toolkit's cuda.h, so it cannot use %s; "
             "rebuild with cuda.h in /usr/local/cuda/include (or CUDA_INCLUDE=...)",
             library_path);
    tg_device_backend *backend = &cuda->backend;
    backend->kind = "cuda";
    backend->context = cuda;
    backend->device_count = cuda_device_count;
    backend->why_unavailable = cuda_why_unavailable;
    backend->device_info = cuda_device_info;
    backend->allocate = cuda_allocate;
    backend->release = cuda_release;
    backend->host_buffer_alloc = cuda_host_buffer_alloc;
    backend->host_buffer_free = cuda_host_buffer_free;
    backend->copy = cuda_copy;
    backend->wait = cuda_wait;
    backend->streams = TG_PRELOAD_CUDA_STREAMS;
    backend->finish = cuda_finish;
    backend->export_fd = cuda_export_fd;
    backend->destroy = cuda_destroy;
    return backend;
}

#endif
