/* The device backends of the preload manager (docs/DESIGN.md §6): where a preload's one
 * allocation lives and how bytes get into it. Three implement it:
 *   preload_host.c  "host"   a sealed memfd, mappable read-only by other processes
 *   preload_cuda.c  "cuda"   CUDA driver API through dlopen("libcuda.so.1"): cuMemCreate
 *                            with POSIX-fd shareable handles, cuMemcpyHtoDAsync on streams
 *   preload_fake.c  "fake"   plain memory with a configurable device count and budget,
 *                            so planning, leases and eviction are tested without a GPU
 * The manager (preload.c) owns planning, the copy engine (worker threads filling a
 * ring of pinned bounce buffers with pread), leases, budgets and LRU eviction; a
 * backend only allocates, copies, exports and frees. All functions are called
 * from the manager's threads; a backend must be thread-safe for copy() on
 * different streams. */
#ifndef TG_PRELOAD_BACKEND_H
#define TG_PRELOAD_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TG_PRELOAD_ALIGN 256 /* every tensor starts at a multiple of this in the allocation */

typedef struct tg_device_info {
    char name[128]; /* "host", "NVIDIA H100 80GB HBM3", "fake device 0" */
    char uuid[64];  /* "GPU-xxxxxxxx-..." for CUDA; "" where none */
    uint64_t total_bytes;
} tg_device_info;

typedef struct tg_device_allocation {
    int device;            /* device index (0 for host) */
    uint64_t bytes;        /* size asked for */
    uint64_t mapped_bytes; /* size actually reserved (granularity-rounded) */
    void *handle;          /* backend's own state */
} tg_device_allocation;

typedef struct tg_device_backend {
    const char *kind; /* "host", "cuda", "fake" */
    void *context;

    /* Devices this backend has now (0 when unavailable: e.g. no CUDA driver). When
     * it has none, why() says so in one sentence ("libcuda.so.1 not found: ..."). */
    int (*device_count)(void *context);
    const char *(*why_unavailable)(void *context);
    int (*device_info)(void *context, int device, tg_device_info *out);

    /* One allocation of at least bytes on device. Returns 0, or -1 with err filled. */
    int (*allocate)(void *context, int device, uint64_t bytes, tg_device_allocation *out, char *err,
                    size_t err_len);
    void (*release)(void *context, tg_device_allocation *allocation);

    /* Pinned (page-locked where the backend can) host memory for bounce buffers. */
    void *(*host_buffer_alloc)(void *context, size_t bytes);
    void (*host_buffer_free)(void *context, void *buffer, size_t bytes);

    /* Copies len bytes from a bounce buffer into allocation at offset, on copy stream
     * `stream` (0 .. streams-1). May return before the copy is done; the buffer must
     * not be reused until wait(stream) returns. Returns 0 or -1 with err. */
    int (*copy)(void *context, tg_device_allocation *allocation, uint64_t offset, const void *src,
                size_t len, int stream, char *err, size_t err_len);
    int (*wait)(void *context, int stream, char *err, size_t err_len);
    int streams;

    /* Once every copy is done: makes the allocation read-only where the backend can
     * (host: seal the memfd against writes, shrinks and grows). */
    int (*finish)(void *context, tg_device_allocation *allocation, char *err, size_t err_len);

    /* A new file descriptor naming the allocation, for SCM_RIGHTS: the memfd (host),
     * a CUDA VMM POSIX fd (cuda). The caller closes it. -1 on error. */
    int (*export_fd)(void *context, tg_device_allocation *allocation, char *err, size_t err_len);

    void (*destroy)(void *context);

    /* Optional (NULL where the backend has none: cuda, fake). A writable CPU mapping
     * of the whole allocation (mapped_bytes long) that the manager's workers pread
     * into directly instead of going through bounce buffers and copy(): one copy
     * instead of two. Valid until finish() or release(), which unmap it. NULL (err
     * filled): the manager uses copy(). */
    void *(*map_for_fill)(void *context, tg_device_allocation *allocation, char *err,
                          size_t err_len);

    /* Optional (NULL where the backend has none: cuda, fake). A new writable file
     * descriptor of the allocation with a file offset of its own (its own open file
     * description), which one worker pwrite()s a blob's bytes into (from a mapping of
     * the blob): the kernel allocates the fresh pages inside the write, with no page
     * fault per 4 KiB page (about half the CPU of a fill through the mapping:
     * bench/preload_host). The caller closes it. -1 (err filled): the
     * worker fills through map_for_fill. */
    int (*fill_fd)(void *context, tg_device_allocation *allocation, char *err, size_t err_len);
} tg_device_backend;

/* Constructors. Each returns NULL only on allocation failure; an unavailable device
 * is a backend whose device_count() is 0 and why_unavailable() says why. */
tg_device_backend *tg_preload_host_backend(void);
tg_device_backend *tg_preload_cuda_backend(void); /* dlopen at construction */
tg_device_backend *tg_preload_fake_backend(int devices, uint64_t bytes_per_device);

#endif
