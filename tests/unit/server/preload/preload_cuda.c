/* Tests server/preload/preload_cuda.c and server/preload/cuda_driver.c without a GPU:
 * - the backend built on this machine (no libcuda.so.1) has no devices and says why;
 * - real dlopen paths: the CUDA Toolkit's stub libcuda.so (cuInit answers
 *   CUDA_ERROR_STUB_LIBRARY) and a library that is not a driver (libc);
 * - the backend's logic over a fake driver table whose functions record every call,
 *   keep real host memory behind fake device addresses, check the calling thread's
 *   current context, and fail on demand (fault injection at every step). */
#include "preload_cuda.h"
#include "test.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

TEST(test_backend_without_driver_is_unavailable)
{
    void *probe = dlopen(TG_CUDA_DRIVER_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (probe != NULL) {
        /* A machine with a driver: the sentence below cannot be checked here. */
        dlclose(probe);
        printf("note: %s loads on this machine; no-driver checks skipped\n",
               TG_CUDA_DRIVER_LIBRARY);
        return;
    }
    tg_device_backend *backend = tg_preload_cuda_backend();
    CHECK(backend != NULL);
    if (backend == NULL)
        return;
    CHECK_STR(backend->kind, "cuda");
    CHECK_EQ_U64(backend->device_count(backend->context), 0);
    const char *why = backend->why_unavailable(backend->context);
    CHECK(why != NULL && strstr(why, "libcuda.so.1") != NULL);
#ifdef TG_HAVE_CUDA_H
    CHECK(why != NULL && strncmp(why, "cannot load the CUDA driver: ", 29) == 0);
#else
    CHECK(why != NULL && strstr(why, "cuda.h") != NULL);
#endif
    tg_device_allocation allocation;
    char err[512] = "";
    CHECK(backend->allocate(backend->context, 0, 4096, &allocation, err, sizeof err) == -1);
    CHECK_STR(err, why);
    CHECK(allocation.handle == NULL);
    tg_device_info info;
    CHECK(backend->device_info(backend->context, 0, &info) == -1);
    CHECK(backend->host_buffer_alloc(backend->context, 4096) == NULL);
    CHECK(backend->streams > 0);
    backend->destroy(backend->context);
}

#ifdef TG_HAVE_CUDA_H

TEST(test_driver_load_errors)
{
    tg_cuda_driver driver;
    char why[512] = "";
    CHECK(tg_cuda_driver_load(&driver, "/nonexistent/libcuda.so.1", why, sizeof why) == -1);
    CHECK(strncmp(why, "cannot load the CUDA driver: ", 29) == 0);
    CHECK(strstr(why, "/nonexistent/libcuda.so.1") != NULL);
    CHECK(driver.library == NULL && driver.init == NULL);

    /* A real library that is not a driver: the first missing entry point is named. */
    CHECK(tg_cuda_driver_load(&driver, "libc.so.6", why, sizeof why) == -1);
    CHECK_STR(why, "the CUDA driver libc.so.6 has no cuGetErrorName (a driver older than CUDA "
                   "11.4 lacks the virtual memory and UUID entry points tensorgate needs)");
    CHECK(driver.library == NULL);
}

/* The toolkit ships a stub libcuda.so for linking: every call answers
 * CUDA_ERROR_STUB_LIBRARY, including cuGetErrorName, so the built-in names are used. */
TEST(test_toolkit_stub_library)
{
    const char *candidates[] = {"/usr/local/cuda/lib64/stubs/libcuda.so",
                                "/usr/local/cuda/lib/stubs/libcuda.so"};
    const char *stub = NULL;
    for (size_t i = 0; i < 2 && stub == NULL; i++)
        if (access(candidates[i], R_OK) == 0)
            stub = candidates[i];
    if (stub == NULL) {
        printf("note: no CUDA Toolkit stub libcuda.so; stub checks skipped\n");
        return;
    }
    tg_cuda_driver driver;
    char why[512] = "";
    CHECK(tg_cuda_driver_load(&driver, stub, why, sizeof why) == 0);
    CHECK(driver.library != NULL && driver.memcpy_htod_async != NULL);
    tg_cuda_driver_unload(&driver);
    CHECK(driver.library == NULL);

    tg_device_backend *backend = tg_preload_cuda_backend_from(stub);
    CHECK(backend != NULL);
    if (backend == NULL)
        return;
    CHECK_EQ_U64(backend->device_count(backend->context), 0);
    CHECK_STR(backend->why_unavailable(backend->context),
              "cuInit: CUDA_ERROR_STUB_LIBRARY: CUDA driver is a stub library (the toolkit's "
              "libcuda.so, not the NVIDIA driver's)");
    backend->destroy(backend->context);
}

/* ---- the fake driver ---- */

#define FAKE_DEVICES 2
#define FAKE_GRANULARITY ((size_t)2 << 20)
#define FAKE_LOG_MAX 512
#define FAKE_MAPPINGS_MAX 16

typedef struct fake_mapping {
    CUdeviceptr base;
    size_t size;
    CUmemGenericAllocationHandle handle;
} fake_mapping;

typedef struct fake_memory {
    int device;
    size_t size;
    unsigned char bytes[]; /* the "device" memory, on the host */
} fake_memory;

static struct {
    pthread_mutex_t lock;
    char log[FAKE_LOG_MAX][128];
    int log_count;
    const char *fail_call; /* the entry point that fails next, with fail_result */
    CUresult fail_result;
    int fail_after; /* calls of fail_call that still succeed first */
    bool names_unavailable;
    int vmm_supported;
    int live_handles, live_reservations, live_mappings, live_streams, retained_contexts;
    int host_buffers, exported_fds;
    CUdeviceptr next_address;
    fake_mapping mappings[FAKE_MAPPINGS_MAX];
    char context_storage[FAKE_DEVICES];
    char stream_storage[64];
    int next_stream;
} fake = {.lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local CUcontext fake_current;

static void fake_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fake_log(const char *fmt, ...)
{
    pthread_mutex_lock(&fake.lock);
    if (fake.log_count < FAKE_LOG_MAX) {
        va_list args;
        va_start(args, fmt);
        vsnprintf(fake.log[fake.log_count++], sizeof fake.log[0], fmt, args);
        va_end(args);
    }
    pthread_mutex_unlock(&fake.lock);
}

/* True when the named call is to fail now (and logs it as failed). */
static bool fake_fails(const char *call)
{
    if (fake.fail_call == NULL || strcmp(fake.fail_call, call) != 0)
        return false;
    if (fake.fail_after > 0) {
        fake.fail_after--;
        return false;
    }
    fake.fail_call = NULL;
    fake_log("%s failed", call);
    return true;
}

static void fake_reset(void)
{
    pthread_mutex_lock(&fake.lock);
    fake.log_count = 0;
    pthread_mutex_unlock(&fake.lock);
    fake.fail_call = NULL;
    fake.fail_after = 0;
    fake.names_unavailable = false;
    fake.vmm_supported = 1;
    fake.next_address = (CUdeviceptr)0x7f0000000000ull;
    fake_current = NULL;
}

/* Index of the first log entry at or after from that starts with prefix, or -1. */
static int log_find(const char *prefix, int from)
{
    for (int i = from; i < fake.log_count; i++)
        if (strncmp(fake.log[i], prefix, strlen(prefix)) == 0)
            return i;
    return -1;
}

static int log_count_of(const char *prefix)
{
    int n = 0;
    for (int i = 0; i < fake.log_count; i++)
        n += strncmp(fake.log[i], prefix, strlen(prefix)) == 0;
    return n;
}

static CUresult fake_get_error_name(CUresult error, const char **name)
{
    if (fake.names_unavailable)
        return CUDA_ERROR_STUB_LIBRARY;
    switch (error) {
    case CUDA_ERROR_OUT_OF_MEMORY:
        *name = "CUDA_ERROR_OUT_OF_MEMORY";
        return CUDA_SUCCESS;
    case CUDA_ERROR_NO_DEVICE:
        *name = "CUDA_ERROR_NO_DEVICE";
        return CUDA_SUCCESS;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
        *name = "CUDA_ERROR_ILLEGAL_ADDRESS";
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult fake_get_error_string(CUresult error, const char **text)
{
    if (fake.names_unavailable)
        return CUDA_ERROR_STUB_LIBRARY;
    switch (error) {
    case CUDA_ERROR_OUT_OF_MEMORY:
        *text = "out of memory";
        return CUDA_SUCCESS;
    case CUDA_ERROR_NO_DEVICE:
        *text = "no CUDA-capable device is detected";
        return CUDA_SUCCESS;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
        *text = "an illegal memory access was encountered";
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult fake_init(unsigned int flags)
{
    fake_log("cuInit flags=%u", flags);
    return fake_fails("cuInit") ? fake.fail_result : CUDA_SUCCESS;
}

static CUresult fake_driver_get_version(int *version)
{
    *version = 13000;
    return CUDA_SUCCESS;
}

static CUresult fake_device_get_count(int *count)
{
    fake_log("cuDeviceGetCount");
    *count = FAKE_DEVICES;
    return CUDA_SUCCESS;
}

/* Device handles differ from ordinals, so a backend that mixes them up is caught. */
static CUresult fake_device_get(CUdevice *device, int ordinal)
{
    if (ordinal < 0 || ordinal >= FAKE_DEVICES)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = 10 + ordinal;
    return CUDA_SUCCESS;
}

static int fake_ordinal(CUdevice device)
{
    return device >= 10 && device < 10 + FAKE_DEVICES ? device - 10 : -1;
}

static CUresult fake_device_get_name(char *name, int len, CUdevice device)
{
    if (fake_ordinal(device) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "Fake GPU %d", fake_ordinal(device));
    return CUDA_SUCCESS;
}

static CUresult fake_device_get_uuid(CUuuid *uuid, CUdevice device)
{
    if (fake_ordinal(device) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    for (int i = 0; i < 16; i++)
        uuid->bytes[i] = (char)(0x10 * fake_ordinal(device) + i + (i == 15 ? 0xe0 : 0));
    return CUDA_SUCCESS;
}

static CUresult fake_device_total_mem(size_t *bytes, CUdevice device)
{
    if (fake_ordinal(device) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = ((size_t)80 << 30) + (size_t)fake_ordinal(device);
    return CUDA_SUCCESS;
}

static CUresult fake_device_get_attribute(int *value, CUdevice_attribute attribute, CUdevice device)
{
    if (fake_ordinal(device) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (attribute == CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED ||
        attribute == CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)
        *value = fake.vmm_supported;
    else
        *value = 0;
    return CUDA_SUCCESS;
}

static CUcontext fake_context_of(int ordinal)
{
    return (CUcontext)(void *)&fake.context_storage[ordinal];
}

static int fake_context_ordinal(CUcontext context)
{
    for (int i = 0; i < FAKE_DEVICES; i++)
        if (context == fake_context_of(i))
            return i;
    return -1;
}

static CUresult fake_primary_ctx_retain(CUcontext *context, CUdevice device)
{
    fake_log("cuDevicePrimaryCtxRetain device=%d", (int)device);
    if (fake_ordinal(device) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (fake_fails("cuDevicePrimaryCtxRetain"))
        return fake.fail_result;
    fake.retained_contexts++;
    *context = fake_context_of(fake_ordinal(device));
    return CUDA_SUCCESS;
}

static CUresult fake_primary_ctx_release(CUdevice device)
{
    fake_log("cuDevicePrimaryCtxRelease device=%d", (int)device);
    fake.retained_contexts--;
    return CUDA_SUCCESS;
}

static CUresult fake_ctx_set_current(CUcontext context)
{
    if (context != NULL && fake_context_ordinal(context) < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_current = context;
    return CUDA_SUCCESS;
}

/* Calls that need a context fail without one, as the real driver does. */
static bool fake_no_context(void)
{
    return fake_current == NULL;
}

static CUresult fake_mem_get_allocation_granularity(size_t *granularity,
                                                    const CUmemAllocationProp *prop,
                                                    CUmemAllocationGranularity_flags option)
{
    fake_log("cuMemGetAllocationGranularity option=%d handle_types=%d", (int)option,
             (int)prop->requestedHandleTypes);
    *granularity = FAKE_GRANULARITY;
    return CUDA_SUCCESS;
}

static CUresult fake_mem_create(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
    fake_log("cuMemCreate size=%zu type=%d handle_types=%d location=%d/%d flags=%llu", size,
             (int)prop->type, (int)prop->requestedHandleTypes, (int)prop->location.type,
             prop->location.id, flags);
    if (fake_no_context())
        return CUDA_ERROR_INVALID_CONTEXT;
    if (size == 0 || size % FAKE_GRANULARITY != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_fails("cuMemCreate"))
        return fake.fail_result;
    fake_memory *memory = calloc(1, sizeof *memory + size);
    if (memory == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memory->device = prop->location.id;
    memory->size = size;
    fake.live_handles++;
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)memory;
    return CUDA_SUCCESS;
}

static CUresult fake_mem_release(CUmemGenericAllocationHandle handle)
{
    fake_log("cuMemRelease");
    free((fake_memory *)(uintptr_t)handle);
    fake.live_handles--;
    return CUDA_SUCCESS;
}

static CUresult fake_mem_address_reserve(CUdeviceptr *address, size_t size, size_t alignment,
                                         CUdeviceptr hint, unsigned long long flags)
{
    fake_log("cuMemAddressReserve size=%zu alignment=%zu hint=%llu flags=%llu", size, alignment,
             (unsigned long long)hint, flags);
    if (fake_fails("cuMemAddressReserve"))
        return fake.fail_result;
    *address = fake.next_address;
    fake.next_address += size + FAKE_GRANULARITY;
    fake.live_reservations++;
    return CUDA_SUCCESS;
}

static CUresult fake_mem_address_free(CUdeviceptr address, size_t size)
{
    (void)address;
    fake_log("cuMemAddressFree size=%zu", size);
    fake.live_reservations--;
    return CUDA_SUCCESS;
}

static CUresult fake_mem_map(CUdeviceptr address, size_t size, size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    fake_log("cuMemMap size=%zu offset=%zu flags=%llu", size, offset, flags);
    if (fake_fails("cuMemMap"))
        return fake.fail_result;
    for (int i = 0; i < FAKE_MAPPINGS_MAX; i++) {
        if (fake.mappings[i].size == 0) {
            fake.mappings[i] = (fake_mapping){address, size, handle};
            fake.live_mappings++;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult fake_mem_unmap(CUdeviceptr address, size_t size)
{
    fake_log("cuMemUnmap size=%zu", size);
    for (int i = 0; i < FAKE_MAPPINGS_MAX; i++) {
        if (fake.mappings[i].size != 0 && fake.mappings[i].base == address) {
            fake.mappings[i].size = 0;
            fake.live_mappings--;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult fake_mem_set_access(CUdeviceptr address, size_t size, const CUmemAccessDesc *desc,
                                    size_t count)
{
    (void)address;
    fake_log("cuMemSetAccess size=%zu count=%zu location=%d/%d flags=%d", size, count,
             (int)desc[0].location.type, desc[0].location.id, (int)desc[0].flags);
    if (fake_fails("cuMemSetAccess"))
        return fake.fail_result;
    return CUDA_SUCCESS;
}

static CUresult fake_mem_export(void *shareable_handle, CUmemGenericAllocationHandle handle,
                                CUmemAllocationHandleType type, unsigned long long flags)
{
    (void)handle;
    fake_log("cuMemExportToShareableHandle type=%d flags=%llu", (int)type, flags);
    if (fake_fails("cuMemExportToShareableHandle"))
        return fake.fail_result;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    int fd = memfd_create("fake-cuda-export", MFD_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_OPERATING_SYSTEM;
    fake.exported_fds++;
    *(int *)shareable_handle = fd;
    return CUDA_SUCCESS;
}

static CUresult fake_mem_host_alloc(void **pointer, size_t bytes, unsigned int flags)
{
    fake_log("cuMemHostAlloc bytes=%zu flags=%u", bytes, flags);
    if (fake_no_context())
        return CUDA_ERROR_INVALID_CONTEXT;
    if (fake_fails("cuMemHostAlloc"))
        return fake.fail_result;
    *pointer = malloc(bytes);
    if (*pointer == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fake.host_buffers++;
    return CUDA_SUCCESS;
}

static CUresult fake_mem_free_host(void *pointer)
{
    fake_log("cuMemFreeHost");
    free(pointer);
    fake.host_buffers--;
    return CUDA_SUCCESS;
}

static int fake_stream_index(CUstream stream)
{
    char *p = (char *)(void *)stream;
    if (p < fake.stream_storage || p >= fake.stream_storage + sizeof fake.stream_storage)
        return -1;
    return (int)(p - fake.stream_storage);
}

static CUresult fake_stream_create(CUstream *stream, unsigned int flags)
{
    pthread_mutex_lock(&fake.lock);
    int index = fake.next_stream;
    fake.next_stream = (fake.next_stream + 1) % (int)sizeof fake.stream_storage;
    pthread_mutex_unlock(&fake.lock);
    fake_log("cuStreamCreate flags=%u context=%d", flags, fake_context_ordinal(fake_current));
    if (fake_no_context())
        return CUDA_ERROR_INVALID_CONTEXT;
    if (fake_fails("cuStreamCreate"))
        return fake.fail_result;
    *stream = (CUstream)(void *)&fake.stream_storage[index];
    fake.live_streams++;
    return CUDA_SUCCESS;
}

static CUresult fake_stream_destroy(CUstream stream)
{
    fake_log("cuStreamDestroy stream=%d", fake_stream_index(stream));
    fake.live_streams--;
    return CUDA_SUCCESS;
}

static CUresult fake_stream_synchronize(CUstream stream)
{
    fake_log("cuStreamSynchronize stream=%d context=%d", fake_stream_index(stream),
             fake_context_ordinal(fake_current));
    if (fake_fails("cuStreamSynchronize"))
        return fake.fail_result;
    return CUDA_SUCCESS;
}

/* Copies for real into the host memory behind the mapping holding destination, and
 * refuses when the thread's current context is not the memory's device. */
static CUresult fake_memcpy_htod_async(CUdeviceptr destination, const void *source, size_t bytes,
                                       CUstream stream)
{
    pthread_mutex_lock(&fake.lock);
    fake_mapping mapping = {0};
    for (int i = 0; i < FAKE_MAPPINGS_MAX; i++)
        if (fake.mappings[i].size != 0 && destination >= fake.mappings[i].base &&
            destination < fake.mappings[i].base + fake.mappings[i].size)
            mapping = fake.mappings[i];
    pthread_mutex_unlock(&fake.lock);
    fake_log("cuMemcpyHtoDAsync offset=%llu bytes=%zu stream=%d",
             (unsigned long long)(destination - mapping.base), bytes, fake_stream_index(stream));
    if (fake_fails("cuMemcpyHtoDAsync"))
        return fake.fail_result;
    if (mapping.size == 0 || destination + bytes > mapping.base + mapping.size)
        return CUDA_ERROR_INVALID_VALUE;
    fake_memory *memory = (fake_memory *)(uintptr_t)mapping.handle;
    if (fake_context_ordinal(fake_current) != memory->device)
        return CUDA_ERROR_INVALID_CONTEXT;
    memcpy(memory->bytes + (destination - mapping.base), source, bytes);
    return CUDA_SUCCESS;
}

static const tg_cuda_driver fake_driver = {
    .library = NULL,
    .get_error_name = fake_get_error_name,
    .get_error_string = fake_get_error_string,
    .init = fake_init,
    .driver_get_version = fake_driver_get_version,
    .device_get_count = fake_device_get_count,
    .device_get = fake_device_get,
    .device_get_name = fake_device_get_name,
    .device_get_uuid = fake_device_get_uuid,
    .device_total_mem = fake_device_total_mem,
    .device_get_attribute = fake_device_get_attribute,
    .primary_ctx_retain = fake_primary_ctx_retain,
    .primary_ctx_release = fake_primary_ctx_release,
    .ctx_set_current = fake_ctx_set_current,
    .mem_get_allocation_granularity = fake_mem_get_allocation_granularity,
    .mem_create = fake_mem_create,
    .mem_release = fake_mem_release,
    .mem_address_reserve = fake_mem_address_reserve,
    .mem_address_free = fake_mem_address_free,
    .mem_map = fake_mem_map,
    .mem_unmap = fake_mem_unmap,
    .mem_set_access = fake_mem_set_access,
    .mem_export_to_shareable_handle = fake_mem_export,
    .mem_host_alloc = fake_mem_host_alloc,
    .mem_free_host = fake_mem_free_host,
    .stream_create = fake_stream_create,
    .stream_destroy = fake_stream_destroy,
    .stream_synchronize = fake_stream_synchronize,
    .memcpy_htod_async = fake_memcpy_htod_async,
};

static tg_device_backend *fake_backend(void)
{
    fake_reset();
    return tg_preload_cuda_backend_with_driver(&fake_driver);
}

/* Nothing the backend created is still alive (after release or destroy). */
static void check_nothing_alive(void)
{
    CHECK_EQ_U64(fake.live_handles, 0);
    CHECK_EQ_U64(fake.live_reservations, 0);
    CHECK_EQ_U64(fake.live_mappings, 0);
}

TEST(test_error_sentences)
{
    char out[256];
    fake_reset();
    tg_cuda_driver_describe(&fake_driver, "cuMemCreate", CUDA_ERROR_OUT_OF_MEMORY, out, sizeof out);
    CHECK_STR(out, "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY: out of memory");
    /* The driver's own words win over the built-in table. */
    tg_cuda_driver_describe(&fake_driver, "cuMemcpyHtoDAsync", CUDA_ERROR_ILLEGAL_ADDRESS, out,
                            sizeof out);
    CHECK_STR(out, "cuMemcpyHtoDAsync: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was "
                   "encountered");
    /* A driver that cannot name errors: the built-in table, then the number. */
    fake.names_unavailable = true;
    tg_cuda_driver_describe(&fake_driver, "cuInit", CUDA_ERROR_NO_DEVICE, out, sizeof out);
    CHECK_STR(out, "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected");
    tg_cuda_driver_describe(&fake_driver, "cuMemcpyHtoDAsync", CUDA_ERROR_ILLEGAL_ADDRESS, out,
                            sizeof out);
    CHECK_STR(out, "cuMemcpyHtoDAsync: CUDA error 700");
    CHECK(tg_cuda_driver_error_name(&fake_driver, (CUresult)12345) == NULL);
    tg_cuda_driver_describe(NULL, "cuMemMap", CUDA_ERROR_OUT_OF_MEMORY, out, sizeof out);
    CHECK_STR(out, "cuMemMap: CUDA_ERROR_OUT_OF_MEMORY: out of memory");
    fake.names_unavailable = false;
}

TEST(test_init_failure_is_unavailable)
{
    fake_reset();
    fake.fail_call = "cuInit";
    fake.fail_result = CUDA_ERROR_NO_DEVICE;
    tg_device_backend *backend = tg_preload_cuda_backend_with_driver(&fake_driver);
    CHECK(backend != NULL);
    if (backend == NULL)
        return;
    CHECK_EQ_U64(backend->device_count(backend->context), 0);
    CHECK_STR(backend->why_unavailable(backend->context),
              "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected");
    CHECK(log_find("cuDeviceGetCount", 0) == -1);
    tg_device_allocation allocation;
    char err[256];
    CHECK(backend->allocate(backend->context, 0, 1, &allocation, err, sizeof err) == -1);
    CHECK_STR(err, "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected");
    backend->destroy(backend->context);
}

TEST(test_devices_and_info)
{
    tg_device_backend *backend = fake_backend();
    CHECK(backend != NULL);
    if (backend == NULL)
        return;
    CHECK_EQ_U64(backend->device_count(backend->context), FAKE_DEVICES);
    CHECK_STR(backend->why_unavailable(backend->context), "");
    CHECK_EQ_U64(log_count_of("cuInit flags=0"), 1);
    /* No context is retained until a device is used. */
    CHECK_EQ_U64(log_count_of("cuDevicePrimaryCtxRetain"), 0);
    tg_device_info info;
    CHECK(backend->device_info(backend->context, 1, &info) == 0);
    CHECK_STR(info.name, "Fake GPU 1");
    CHECK_STR(info.uuid, "GPU-10111213-1415-1617-1819-1a1b1c1d1eff");
    CHECK_EQ_U64(info.total_bytes, ((uint64_t)80 << 30) + 1);
    CHECK(backend->device_info(backend->context, 0, &info) == 0);
    CHECK_STR(info.uuid, "GPU-00010203-0405-0607-0809-0a0b0c0d0eef");
    CHECK(backend->device_info(backend->context, 2, &info) == -1);
    CHECK(backend->device_info(backend->context, -1, &info) == -1);
    CHECK_EQ_U64(backend->streams, TG_PRELOAD_CUDA_STREAMS);

    tg_device_allocation allocation;
    char err[256];
    CHECK(backend->allocate(backend->context, 2, 1, &allocation, err, sizeof err) == -1);
    CHECK_STR(err, "cuda:2 does not exist (this host has 2 CUDA devices)");
    backend->destroy(backend->context);
    CHECK_EQ_U64(fake.retained_contexts, 0);
}

TEST(test_allocation_sizes_and_order)
{
    tg_device_backend *backend = fake_backend();
    if (backend == NULL) {
        CHECK(backend != NULL);
        return;
    }
    struct {
        uint64_t asked, mapped;
    } cases[] = {
        {0, FAKE_GRANULARITY},
        {1, FAKE_GRANULARITY},
        {FAKE_GRANULARITY - 1, FAKE_GRANULARITY},
        {FAKE_GRANULARITY, FAKE_GRANULARITY},
        {FAKE_GRANULARITY + 1, 2 * FAKE_GRANULARITY},
        {5 * FAKE_GRANULARITY + 256, 6 * FAKE_GRANULARITY},
    };
    char err[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_device_allocation allocation;
        CHECK(backend->allocate(backend->context, 1, cases[i].asked, &allocation, err,
                                sizeof err) == 0);
        CHECK_EQ_U64(allocation.bytes, cases[i].asked);
        CHECK_EQ_U64(allocation.mapped_bytes, cases[i].mapped);
        CHECK_EQ_U64(allocation.device, 1);
        CHECK(allocation.handle != NULL);
        backend->release(backend->context, &allocation);
        CHECK(allocation.handle == NULL);
    }
    check_nothing_alive();

    /* One allocation on device 1, call by call. */
    fake.log_count = 0;
    tg_device_allocation allocation;
    CHECK(backend->allocate(backend->context, 1, 3 * FAKE_GRANULARITY, &allocation, err,
                            sizeof err) == 0);
    char expected[128];
    snprintf(expected, sizeof expected,
             "cuMemCreate size=%zu type=%d handle_types=%d location=%d/1 flags=0",
             3 * FAKE_GRANULARITY, (int)CU_MEM_ALLOCATION_TYPE_PINNED,
             (int)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, (int)CU_MEM_LOCATION_TYPE_DEVICE);
    CHECK_EQ_U64(fake.log_count, 4);
    CHECK_STR(fake.log[0], expected);
    snprintf(expected, sizeof expected, "cuMemAddressReserve size=%zu alignment=%zu hint=0 flags=0",
             3 * FAKE_GRANULARITY, FAKE_GRANULARITY);
    CHECK_STR(fake.log[1], expected);
    snprintf(expected, sizeof expected, "cuMemMap size=%zu offset=0 flags=0", 3 * FAKE_GRANULARITY);
    CHECK_STR(fake.log[2], expected);
    snprintf(expected, sizeof expected, "cuMemSetAccess size=%zu count=1 location=%d/1 flags=%d",
             3 * FAKE_GRANULARITY, (int)CU_MEM_LOCATION_TYPE_DEVICE,
             (int)CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_STR(fake.log[3], expected);

    /* Each export is a new descriptor of the POSIX fd kind. */
    int fd1 = backend->export_fd(backend->context, &allocation, err, sizeof err);
    int fd2 = backend->export_fd(backend->context, &allocation, err, sizeof err);
    CHECK(fd1 >= 0 && fd2 >= 0 && fd1 != fd2);
    CHECK(fcntl(fd1, F_GETFD) != -1 && fcntl(fd2, F_GETFD) != -1);
    snprintf(expected, sizeof expected, "cuMemExportToShareableHandle type=%d flags=0",
             (int)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CHECK_STR(fake.log[4], expected);
    CHECK_STR(fake.log[5], expected);
    close(fd1);
    close(fd2);

    /* Release: drain the device's streams, then unmap, free the range, release. */
    fake.log_count = 0;
    backend->release(backend->context, &allocation);
    CHECK_EQ_U64(fake.log_count, TG_PRELOAD_CUDA_STREAMS + 3);
    for (int s = 0; s < TG_PRELOAD_CUDA_STREAMS; s++)
        CHECK(strncmp(fake.log[s], "cuStreamSynchronize", 19) == 0 &&
              strstr(fake.log[s], "context=1") != NULL);
    snprintf(expected, sizeof expected, "cuMemUnmap size=%zu", 3 * FAKE_GRANULARITY);
    CHECK_STR(fake.log[TG_PRELOAD_CUDA_STREAMS], expected);
    snprintf(expected, sizeof expected, "cuMemAddressFree size=%zu", 3 * FAKE_GRANULARITY);
    CHECK_STR(fake.log[TG_PRELOAD_CUDA_STREAMS + 1], expected);
    CHECK_STR(fake.log[TG_PRELOAD_CUDA_STREAMS + 2], "cuMemRelease");
    check_nothing_alive();
    /* Released twice is harmless; export of a released one is an error. */
    backend->release(backend->context, &allocation);
    CHECK(backend->export_fd(backend->context, &allocation, err, sizeof err) == -1);
    CHECK_STR(err, "export of an allocation that was released");

    /* Only device 1 got a context: device 0 was never used. */
    CHECK_EQ_U64(fake.retained_contexts, 1);
    fake.log_count = 0;
    backend->destroy(backend->context);
    CHECK_EQ_U64(fake.retained_contexts, 0);
    CHECK_EQ_U64(fake.live_streams, 0);
    CHECK_EQ_U64(log_count_of("cuStreamDestroy"), TG_PRELOAD_CUDA_STREAMS);
    CHECK_EQ_U64(log_count_of("cuDevicePrimaryCtxRelease device=11"), 1);
}

TEST(test_allocation_too_large)
{
    tg_device_backend *backend = fake_backend();
    if (backend == NULL) {
        CHECK(backend != NULL);
        return;
    }
    tg_device_allocation allocation;
    char err[256];
    /* Sets the device up first, then measures that no allocation call is made. */
    CHECK(backend->allocate(backend->context, 0, 1, &allocation, err, sizeof err) == 0);
    backend->release(backend->context, &allocation);
    fake.log_count = 0;
    CHECK(backend->allocate(backend->context, 0, UINT64_MAX, &allocation, err, sizeof err) == -1);
    CHECK_STR(err, "cuda:0: 18446744073709551615 bytes cannot be allocated");
    CHECK(allocation.handle == NULL);
    CHECK_EQ_U64(log_count_of("cuMemCreate"), 0);
    backend->destroy(backend->context);
    check_nothing_alive();
}

/* Fault injection at every step of allocate: each failure is one sentence naming the
 * call, and whatever was made before it is undone in reverse order. */
TEST(test_allocation_failures_unwind)
{
    static const char *steps[] = {"cuMemCreate", "cuMemAddressReserve", "cuMemMap",
                                  "cuMemSetAccess"};
    tg_device_backend *backend = fake_backend();
    if (backend == NULL) {
        CHECK(backend != NULL);
        return;
    }
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        fake.log_count = 0;
        fake.fail_call = steps[i];
        fake.fail_result = CUDA_ERROR_OUT_OF_MEMORY;
        tg_device_allocation allocation;
        char err[256] = "";
        CHECK(backend->allocate(backend->context, 0, 4096, &allocation, err, sizeof err) == -1);
        char expected[128];
        snprintf(expected, sizeof expected, "%s: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
                 steps[i]);
        CHECK_STR(err, expected);
        CHECK(allocation.handle == NULL);
        check_nothing_alive();
        int failed = log_find(steps[i], 0);
        failed = log_find(steps[i], failed + 1); /* the "failed" line */
        CHECK(failed >= 0);
        int unmap = log_find("cuMemUnmap", 0);
        int address_free = log_find("cuMemAddressFree", 0);
        int release = log_find("cuMemRelease", 0);
        CHECK((unmap >= 0) == (i >= 3));
        CHECK((address_free >= 0) == (i >= 2));
        CHECK((release >= 0) == (i >= 1));
        if (unmap >= 0)
            CHECK(unmap > failed && unmap < address_free);
        if (address_free >= 0)
            CHECK(address_free > failed && address_free < release);
    }
    /* The backend still works after every failure. */
    tg_device_allocation allocation;
    char err[256];
    CHECK(backend->allocate(backend->context, 0, 4096, &allocation, err, sizeof err) == 0);
    fake.fail_call = "cuMemExportToShareableHandle";
    fake.fail_result = CUDA_ERROR_OUT_OF_MEMORY;
    CHECK(backend->export_fd(backend->context, &allocation, err, sizeof err) == -1);
    CHECK_STR(err, "cuMemExportToShareableHandle: CUDA_ERROR_OUT_OF_MEMORY: out of memory");
    backend->release(backend->context, &allocation);
    backend->destroy(backend->context);
    check_nothing_alive();
}

TEST(test_device_setup_failures)
{
    tg_device_backend *backend = fake_backend();
    if (backend == NULL) {
        CHECK(backend != NULL);
        return;
    }
    tg_device_allocation allocation;
    char err[256];
    fake.vmm_supported = 0;
    CHECK(backend->allocate(backend->context, 1, 1, &allocation, err, sizeof err) == -1);
    CHECK_STR(err, "cuda:1 does not support CUDA virtual memory management (cuMemCreate)");
    CHECK_EQ_U64(fake.retained_contexts, 0);
    fake.vmm_supported = 1;

    /* The third stream fails: the two made are destroyed and the context released. */
    fake.log_count = 0;
    fake.fail_call = "cuStreamCreate";
    fake.fail_after = 2;
    fake.fail_result = CUDA_ERROR_OUT_OF_MEMORY;
    CHECK(backend->allocate(backend->context, 1, 1, &allocation, err, sizeof err) == -1);
    CHECK_STR(err, "cuStreamCreate: CUDA_ERROR_OUT_OF_MEMORY: out of memory");
    CHECK_EQ_U64(fake.live_streams, 0);
    CHECK_EQ_U64(fake.retained_contexts, 0);
    CHECK_EQ_U64(log_count_of("cuStreamDestroy"), 2);

    /* A later call sets the device up again. */
    fake.log_count = 0;
    CHECK(backend->allocate(backend->context, 1, 1, &allocation, err, sizeof err) == 0);
    CHECK_EQ_U64(fake.live_streams, TG_PRELOAD_CUDA_STREAMS);
    CHECK_EQ_U64(log_count_of("cuStreamCreate flags=1 context=1"), TG_PRELOAD_CUDA_STREAMS);
    char expected[96];
    snprintf(expected, sizeof expected, "cuMemGetAllocationGranularity option=%d handle_types=%d",
             (int)CU_MEM_ALLOC_GRANULARITY_MINIMUM, (int)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CHECK_EQ_U64(log_count_of(expected), 1);
    backend->release(backend->context, &allocation);
    backend->destroy(backend->context);
    CHECK_EQ_U64(fake.live_streams, 0);
    CHECK_EQ_U64(fake.retained_contexts, 0);
}

/* The stream index each copy went to, read from the fake's log. */
static int logged_stream(int entry)
{
    const char *at = strstr(fake.log[entry], "stream=");
    return at ? atoi(at + 7) : -2;
}

TEST(test_copies_streams_and_wait)
{
    tg_device_backend *backend = fake_backend();
    if (backend == NULL) {
        CHECK(backend != NULL);
        return;
    }
    tg_device_allocation allocation;
    char err[256];
    uint64_t bytes = FAKE_GRANULARITY + 1000;
    CHECK(backend->allocate(backend->context, 1, bytes, &allocation, err, sizeof err) == 0);
    /* Chunks of 512 KiB at 256-aligned offsets, round-robin over the streams, as the
     * manager's copy workers issue them. */
    size_t chunk = 512 << 10;
    unsigned char *source = malloc(bytes);
    CHECK(source != NULL);
    if (source == NULL)
        return;
    for (uint64_t i = 0; i < bytes; i++)
        source[i] = (unsigned char)(i * 7 + (i >> 11));
    fake.log_count = 0;
    int copies = 0;
    for (uint64_t offset = 0; offset < bytes; offset += chunk, copies++) {
        size_t len = (size_t)(bytes - offset < chunk ? bytes - offset : chunk);
        CHECK(backend->copy(backend->context, &allocation, offset, source + offset, len,
                            copies % backend->streams, err, sizeof err) == 0);
    }
    CHECK_EQ_U64(copies, 5);
    CHECK_EQ_U64(fake.log_count, copies);
    /* Stream index k always names the same CUstream, and the four are distinct. */
    int seen[TG_PRELOAD_CUDA_STREAMS];
    for (int k = 0; k < TG_PRELOAD_CUDA_STREAMS; k++)
        seen[k] = logged_stream(k);
    CHECK_EQ_U64(logged_stream(4), seen[0]);
    for (int a = 0; a < TG_PRELOAD_CUDA_STREAMS; a++)
        for (int b = a + 1; b < TG_PRELOAD_CUDA_STREAMS; b++)
            CHECK(seen[a] != seen[b] && seen[a] >= 0);

    /* The bytes are where the offsets say. */
    fake_memory *memory = NULL;
    for (int i = 0; i < FAKE_MAPPINGS_MAX; i++)
        if (fake.mappings[i].size != 0)
            memory = (fake_memory *)(uintptr_t)fake.mappings[i].handle;
    CHECK(memory != NULL && memory->size == 2 * FAKE_GRANULARITY);
    if (memory != NULL)
        CHECK(memcmp(memory->bytes, source, bytes) == 0);

    /* wait(k) drains exactly stream k of the device in use. */
    fake.log_count = 0;
    CHECK(backend->wait(backend->context, 2, err, sizeof err) == 0);
    CHECK_EQ_U64(fake.log_count, 1);
    char expected[64];
    snprintf(expected, sizeof expected, "cuStreamSynchronize stream=%d context=1", seen[2]);
    CHECK_STR(fake.log[0], expected);
    fake.fail_call = "cuStreamSynchronize";
    fake.fail_result = CUDA_ERROR_ILLEGAL_ADDRESS;
    CHECK(backend->wait(backend->context, 1, err, sizeof err) == -1);
    CHECK_STR(err, "cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access "
                   "was encountered");

    /* Refused before reaching the driver: bad stream, overrun, offset overflow. */
    fake.log_count = 0;
    CHECK(backend->copy(backend->context, &allocation, 0, source, 16, 4, err, sizeof err) == -1);
    CHECK_STR(err, "copy stream 4 is not in 0..3");
    CHECK(backend->copy(backend->context, &allocation, 0, source, 16, -1, err, sizeof err) == -1);
    CHECK(backend->wait(backend->context, 4, err, sizeof err) == -1);
    CHECK(backend->copy(backend->context, &allocation, bytes - 8, source, 16, 0, err, sizeof err) ==
          -1);
    CHECK(strstr(err, "overruns") != NULL);
    CHECK(backend->copy(backend->context, &allocation, UINT64_MAX - 4, source, 16, 0, err,
                        sizeof err) == -1);
    CHECK_EQ_U64(fake.log_count, 0);

    /* A driver error in the copy becomes a sentence. */
    fake.fail_call = "cuMemcpyHtoDAsync";
    fake.fail_result = CUDA_ERROR_ILLEGAL_ADDRESS;
    CHECK(backend->copy(backend->context, &allocation, 0, source, 16, 0, err, sizeof err) == -1);
    CHECK_STR(err, "cuMemcpyHtoDAsync: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was "
                   "encountered");

    /* finish() drains every stream of the device. */
    fake.log_count = 0;
    CHECK(backend->finish(backend->context, &allocation, err, sizeof err) == 0);
    CHECK_EQ_U64(log_count_of("cuStreamSynchronize"), TG_PRELOAD_CUDA_STREAMS);
    backend->release(backend->context, &allocation);
    CHECK(backend->copy(backend->context, &allocation, 0, source, 16, 0, err, sizeof err) == -1);
    CHECK_STR(err, "copy into an allocation that was released");
    free(source);
    backend->destroy(backend->context);
    check_nothing_alive();
}

typedef struct copy_job {
    tg_device_backend *backend;
    tg_device_allocation *allocation;
    const unsigned char *source;
    uint64_t offset;
    size_t len;
    int stream;
    int status;
    char err[256];
} copy_job;

static void *copy_thread(void *argument)
{
    copy_job *job = argument;
    job->status = job->backend->copy(job->backend->context, job->allocation, job->offset,
                                     job->source + job->offset, job->len, job->stream, job->err,
                                     sizeof job->err);
    if (job->status == 0)
        job->status =
            job->backend->wait(job->backend->context, job->stream, job->err, sizeof job->err);
    return NULL;
}

/* Threads that never touched CUDA copy correctly: each call makes the device's
 * context current first (the fake refuses a copy under the wrong context). */
TEST(test_copies_from_fresh_threads)
{
    tg_device_backend *backend = fake_backend();
    if (backend == NULL) {
        CHECK(backend != NULL);
        return;
    }
    tg_device_allocation on_device0, on_device1;
    char err[256];
    CHECK(backend->allocate(backend->context, 0, 8192, &on_device0, err, sizeof err) == 0);
    CHECK(backend->allocate(backend->context, 1, 8192, &on_device1, err, sizeof err) == 0);
    unsigned char source[8192];
    for (size_t i = 0; i < sizeof source; i++)
        source[i] = (unsigned char)(i ^ 0x5a);
    copy_job jobs[8];
    pthread_t threads[8];
    for (int t = 0; t < 8; t++) {
        jobs[t] = (copy_job){backend, t % 2 ? &on_device1 : &on_device0,
                             source,  (uint64_t)(t / 2) * 2048,
                             2048,    t % 4,
                             -1,      ""};
        CHECK(pthread_create(&threads[t], NULL, copy_thread, &jobs[t]) == 0);
    }
    for (int t = 0; t < 8; t++) {
        pthread_join(threads[t], NULL);
        CHECK(jobs[t].status == 0);
        if (jobs[t].status != 0)
            fprintf(stderr, "copy thread %d: %s\n", t, jobs[t].err);
    }
    for (int i = 0; i < FAKE_MAPPINGS_MAX; i++)
        if (fake.mappings[i].size != 0)
            CHECK(memcmp(((fake_memory *)(uintptr_t)fake.mappings[i].handle)->bytes, source,
                         sizeof source) == 0);
    /* With both devices in use, wait(k) drains stream k on each. */
    fake.log_count = 0;
    CHECK(backend->wait(backend->context, 0, err, sizeof err) == 0);
    CHECK_EQ_U64(fake.log_count, 2);
    CHECK(strstr(fake.log[0], "context=0") != NULL && strstr(fake.log[1], "context=1") != NULL);
    backend->release(backend->context, &on_device0);
    backend->release(backend->context, &on_device1);
    backend->destroy(backend->context);
    check_nothing_alive();
    CHECK_EQ_U64(fake.retained_contexts, 0);
}

TEST(test_host_buffers)
{
    tg_device_backend *backend = fake_backend();
    if (backend == NULL) {
        CHECK(backend != NULL);
        return;
    }
    void *buffer = backend->host_buffer_alloc(backend->context, 1 << 20);
    CHECK(buffer != NULL);
    char expected[64];
    snprintf(expected, sizeof expected, "cuMemHostAlloc bytes=%d flags=%d", 1 << 20,
             CU_MEMHOSTALLOC_PORTABLE);
    CHECK_EQ_U64(log_count_of(expected), 1);
    CHECK_EQ_U64(fake.host_buffers, 1);
    if (buffer != NULL)
        memset(buffer, 0xab, 1 << 20);
    backend->host_buffer_free(backend->context, buffer, 1 << 20);
    CHECK_EQ_U64(fake.host_buffers, 0);
    fake.fail_call = "cuMemHostAlloc";
    fake.fail_result = CUDA_ERROR_OUT_OF_MEMORY;
    CHECK(backend->host_buffer_alloc(backend->context, 4096) == NULL);
    CHECK_EQ_U64(fake.host_buffers, 0);
    backend->destroy(backend->context);
}

#endif /* TG_HAVE_CUDA_H */

int main(int argc, char **argv)
{
    (void)argc;
    RUN(test_backend_without_driver_is_unavailable);
#ifdef TG_HAVE_CUDA_H
    RUN(test_driver_load_errors);
    RUN(test_toolkit_stub_library);
    RUN(test_error_sentences);
    RUN(test_init_failure_is_unavailable);
    RUN(test_devices_and_info);
    RUN(test_allocation_sizes_and_order);
    RUN(test_allocation_too_large);
    RUN(test_allocation_failures_unwind);
    RUN(test_device_setup_failures);
    RUN(test_copies_streams_and_wait);
    RUN(test_copies_from_fresh_threads);
    RUN(test_host_buffers);
#endif
    return test_report(argv[0]);
}
