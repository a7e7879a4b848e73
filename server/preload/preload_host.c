/* The "host" preload backend: one allocation is one memfd. The manager fills it
 * through fill_fd (a writable descriptor per worker that it pwrite()s the blob
 * into from a mapping of the blob: one copy in the kernel, no destination faults), map_for_fill (a
 * writable shared mapping the workers pread into: one copy, a fault per page; for conversions and
 * blobs without a descriptor) or copy() (pwrite from a bounce buffer); finish() unmaps the writable
 * mapping first (F_SEAL_WRITE is refused while one exists), then seals against writes and growing,
 * and seals the seals, so a consumer that maps the fd read-only sees bytes nobody else can change.
 *
 * Shrinking is deliberately NOT sealed: the server must be able to take the memory
 * back. A consumer may keep the descriptor it received after its lease ended (the
 * lease is the socket, the fd is only a name of the memory); so release() first
 * truncates the memfd to 0 bytes, which frees its pages whoever still holds a
 * descriptor or a mapping, and only then closes it. The consumer's descriptor is a
 * read-only open file description (export_fd), so it can neither truncate, write,
 * grow nor add seals. A consumer touching its mapping after the lease ended gets
 * SIGBUS: it may use the memory only while it holds the lease socket open. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"
#include "preload_backend.h"

typedef struct host_allocation {
    int fd;
    void *fill_map; /* the writable mapping of map_for_fill, or NULL; gone before sealing */
    size_t fill_map_bytes;
} host_allocation;

static int host_device_count(void *context)
{
    (void)context;
    return 1;
}

static const char *host_why_unavailable(void *context)
{
    (void)context;
    return "";
}

static int host_device_info(void *context, int device, tg_device_info *out)
{
    (void)context;
    if (device != 0)
        return -1;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "host");
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    out->total_bytes = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
    return 0;
}

static int host_allocate(void *context, int device, uint64_t bytes, tg_device_allocation *out,
                         char *err, size_t err_len)
{
    (void)context;
    memset(out, 0, sizeof *out);
    long page = sysconf(_SC_PAGESIZE);
    uint64_t page_size = page > 0 ? (uint64_t)page : 4096;
    uint64_t rounded = (bytes + page_size - 1) / page_size * page_size;
    if (device != 0 || rounded < bytes || rounded > (uint64_t)LLONG_MAX) {
        snprintf(err, err_len, "no host device %d or size %llu too large", device,
                 (unsigned long long)bytes);
        return -1;
    }
    host_allocation *h = calloc(1, sizeof *h);
    if (h == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    h->fd = memfd_create("tensorgate-preload", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (h->fd < 0) {
        snprintf(err, err_len, "memfd_create: %s", strerror(errno));
        free(h);
        return -1;
    }
    if (ftruncate(h->fd, (off_t)rounded) != 0) {
        snprintf(err, err_len, "sizing the memfd to %llu bytes: %s", (unsigned long long)rounded,
                 strerror(errno));
        close(h->fd);
        free(h);
        return -1;
    }
    out->device = device;
    out->bytes = bytes;
    out->mapped_bytes = rounded;
    out->handle = h;
    return 0;
}

static void host_release(void *context, tg_device_allocation *allocation)
{
    (void)context;
    host_allocation *h = allocation->handle;
    if (h == NULL)
        return;
    if (h->fill_map != NULL)
        munmap(h->fill_map, h->fill_map_bytes);
    /* Frees the pages now even if a consumer kept a descriptor or a mapping (shrinking
     * is not sealed); closing alone would leave them to the consumer's close. */
    if (ftruncate(h->fd, 0) != 0)
        tg_log(TG_LOG_ERROR, "preload: cannot truncate a released memfd: %s", strerror(errno));
    close(h->fd);
    free(h);
    allocation->handle = NULL;
}

/* Page-aligned, page-locked when the limits allow (mlock failing is not an error:
 * the buffer still works, it can only be paged out). */
static void *host_buffer_alloc(void *context, size_t bytes)
{
    (void)context;
    void *buffer = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (buffer == MAP_FAILED)
        return NULL;
    (void)mlock(buffer, bytes);
    return buffer;
}

static void host_buffer_free(void *context, void *buffer, size_t bytes)
{
    (void)context;
    munmap(buffer, bytes);
}

static int host_copy(void *context, tg_device_allocation *allocation, uint64_t offset,
                     const void *src, size_t len, int stream, char *err, size_t err_len)
{
    (void)context;
    (void)stream;
    host_allocation *h = allocation->handle;
    uint64_t end;
    if (__builtin_add_overflow(offset, (uint64_t)len, &end) || end > allocation->mapped_bytes) {
        snprintf(err, err_len, "copy of %zu bytes at %llu is outside the allocation", len,
                 (unsigned long long)offset);
        return -1;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t n = pwrite(h->fd, (const char *)src + done, len - done, (off_t)(offset + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            snprintf(err, err_len, "writing the memfd: %s",
                     n < 0 ? strerror(errno) : "no progress");
            return -1;
        }
        done += (size_t)n;
    }
    return 0;
}

static int host_wait(void *context, int stream, char *err, size_t err_len)
{
    (void)context;
    (void)stream;
    (void)err;
    (void)err_len;
    return 0; /* pwrite is synchronous */
}

static int host_finish(void *context, tg_device_allocation *allocation, char *err, size_t err_len)
{
    (void)context;
    host_allocation *h = allocation->handle;
    if (h->fill_map != NULL) {
        munmap(h->fill_map, h->fill_map_bytes);
        h->fill_map = NULL;
    }
    if (fcntl(h->fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
        snprintf(err, err_len, "sealing the memfd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* A new open file description of the allocation's memfd (through /proc), with
 * its own mode and file offset: -1 with err (what it was for) on failure. */
static int reopen_memfd(tg_device_allocation *allocation, int mode, const char *what, char *err,
                        size_t err_len)
{
    host_allocation *h = allocation->handle;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", h->fd);
    int fd = open(path, mode | O_CLOEXEC);
    if (fd < 0)
        snprintf(err, err_len, "opening the memfd %s through /proc: %s", what, strerror(errno));
    return fd;
}

/* A read-only open file description of the memfd, so the consumer's fd cannot
 * write, truncate (the server's release() relies on that: it alone may shrink the
 * memfd) or add seals. Without /proc there is no way to give a read-only
 * description of a memfd, and a dup() would let the consumer truncate or pin the
 * memory: refused then. */
static int host_export_fd(void *context, tg_device_allocation *allocation, char *err,
                          size_t err_len)
{
    (void)context;
    return reopen_memfd(allocation, O_RDONLY, "read-only", err, err_len);
}

/* A read-write open file description of the memfd of its own, one per fill
 * worker. Before finish(): the seals refuse writes after it. */
static int host_fill_fd(void *context, tg_device_allocation *allocation, char *err, size_t err_len)
{
    (void)context;
    return reopen_memfd(allocation, O_RDWR, "for writing", err, err_len);
}

static void *host_map_for_fill(void *context, tg_device_allocation *allocation, char *err,
                               size_t err_len)
{
    (void)context;
    host_allocation *h = allocation->handle;
    if (h->fill_map != NULL)
        return h->fill_map;
    if (allocation->mapped_bytes == 0 || allocation->mapped_bytes > SIZE_MAX) {
        snprintf(err, err_len, "nothing to map");
        return NULL;
    }
    size_t bytes = (size_t)allocation->mapped_bytes;
    /* No MAP_POPULATE, fallocate or MADV_POPULATE_WRITE: allocating the fresh shmem
     * pages is the cost of a host preload, and it is cheapest spread over the
     * workers' parallel page faults inside pread (measured: bench/preload_host). */
    void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
    if (map == MAP_FAILED) {
        snprintf(err, err_len, "mapping the memfd: %s", strerror(errno));
        return NULL;
    }
    h->fill_map = map;
    h->fill_map_bytes = bytes;
    return map;
}

static void host_destroy(void *context)
{
    free(context);
}

tg_device_backend *tg_preload_host_backend(void)
{
    tg_device_backend *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    b->kind = "host";
    b->context = b; /* freed by destroy: the backend itself */
    b->device_count = host_device_count;
    b->why_unavailable = host_why_unavailable;
    b->device_info = host_device_info;
    b->allocate = host_allocate;
    b->release = host_release;
    b->host_buffer_alloc = host_buffer_alloc;
    b->host_buffer_free = host_buffer_free;
    b->copy = host_copy;
    b->wait = host_wait;
    b->streams = 8;
    b->finish = host_finish;
    b->export_fd = host_export_fd;
    b->destroy = host_destroy;
    b->map_for_fill = host_map_for_fill;
    b->fill_fd = host_fill_fd;
    return b;
}
