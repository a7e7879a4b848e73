/* The "fake" preload backend: plain memory standing in for N devices with a byte
 * budget each, so planning, leases and eviction are tested without a GPU. It
 * refuses an allocation beyond a device's budget like a full GPU would, and
 * exports an allocation as a sealed memfd holding a copy of its bytes, so a
 * consumer can check what was placed. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "preload_backend.h"

typedef struct fake_context {
    tg_device_backend backend;
    int devices;
    uint64_t budget;
    pthread_mutex_t lock;
    uint64_t used[16];
} fake_context;

static int fake_device_count(void *context)
{
    return ((fake_context *)context)->devices;
}

static const char *fake_why_unavailable(void *context)
{
    return ((fake_context *)context)->devices > 0 ? "" : "the fake backend has no devices";
}

static int fake_device_info(void *context, int device, tg_device_info *out)
{
    fake_context *f = context;
    if (device < 0 || device >= f->devices)
        return -1;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "fake device %d", device);
    snprintf(out->uuid, sizeof out->uuid, "FAKE-%08d", device);
    out->total_bytes = f->budget;
    return 0;
}

static int fake_allocate(void *context, int device, uint64_t bytes, tg_device_allocation *out,
                         char *err, size_t err_len)
{
    fake_context *f = context;
    memset(out, 0, sizeof *out);
    if (device < 0 || device >= f->devices) {
        snprintf(err, err_len, "no fake device %d", device);
        return -1;
    }
    pthread_mutex_lock(&f->lock);
    bool fits = bytes <= f->budget && f->used[device] <= f->budget - bytes;
    if (fits)
        f->used[device] += bytes;
    pthread_mutex_unlock(&f->lock);
    if (!fits || bytes > SIZE_MAX) {
        snprintf(err, err_len, "fake device %d is out of memory", device);
        if (fits) {
            pthread_mutex_lock(&f->lock);
            f->used[device] -= bytes;
            pthread_mutex_unlock(&f->lock);
        }
        return -1;
    }
    out->handle = calloc(1, bytes ? (size_t)bytes : 1);
    if (out->handle == NULL) {
        pthread_mutex_lock(&f->lock);
        f->used[device] -= bytes;
        pthread_mutex_unlock(&f->lock);
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    out->device = device;
    out->bytes = bytes;
    out->mapped_bytes = bytes;
    return 0;
}

static void fake_release(void *context, tg_device_allocation *allocation)
{
    fake_context *f = context;
    if (allocation->handle == NULL)
        return;
    free(allocation->handle);
    allocation->handle = NULL;
    pthread_mutex_lock(&f->lock);
    f->used[allocation->device] -= allocation->bytes;
    pthread_mutex_unlock(&f->lock);
}

static void *fake_buffer_alloc(void *context, size_t bytes)
{
    (void)context;
    return malloc(bytes);
}

static void fake_buffer_free(void *context, void *buffer, size_t bytes)
{
    (void)context;
    (void)bytes;
    free(buffer);
}

static int fake_copy(void *context, tg_device_allocation *allocation, uint64_t offset,
                     const void *src, size_t len, int stream, char *err, size_t err_len)
{
    fake_context *f = context;
    uint64_t end;
    if (stream < 0 || stream >= f->backend.streams ||
        __builtin_add_overflow(offset, (uint64_t)len, &end) || end > allocation->bytes) {
        snprintf(err, err_len, "copy of %zu bytes at %llu on stream %d is outside the allocation",
                 len, (unsigned long long)offset, stream);
        return -1;
    }
    memcpy((char *)allocation->handle + offset, src, len);
    return 0;
}

static int fake_wait(void *context, int stream, char *err, size_t err_len)
{
    fake_context *f = context;
    if (stream < 0 || stream >= f->backend.streams) {
        snprintf(err, err_len, "no stream %d", stream);
        return -1;
    }
    return 0;
}

static int fake_finish(void *context, tg_device_allocation *allocation, char *err, size_t err_len)
{
    (void)context;
    (void)allocation;
    (void)err;
    (void)err_len;
    return 0;
}

static int fake_export_fd(void *context, tg_device_allocation *allocation, char *err,
                          size_t err_len)
{
    (void)context;
    int fd = memfd_create("tensorgate-fake-device", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        snprintf(err, err_len, "memfd_create: %s", strerror(errno));
        return -1;
    }
    size_t done = 0, len = (size_t)allocation->bytes;
    if (ftruncate(fd, (off_t)len) != 0)
        goto fail;
    while (done < len) {
        ssize_t n = pwrite(fd, (const char *)allocation->handle + done, len - done, (off_t)done);
        if (n <= 0)
            goto fail;
        done += (size_t)n;
    }
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
        goto fail;
    return fd;
fail:
    snprintf(err, err_len, "filling the export memfd: %s", strerror(errno));
    close(fd);
    return -1;
}

static void fake_destroy(void *context)
{
    fake_context *f = context;
    pthread_mutex_destroy(&f->lock);
    free(f);
}

tg_device_backend *tg_preload_fake_backend(int devices, uint64_t bytes_per_device)
{
    fake_context *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    if (devices < 0)
        devices = 0;
    if (devices > 16)
        devices = 16;
    f->devices = devices;
    f->budget = bytes_per_device;
    pthread_mutex_init(&f->lock, NULL);
    tg_device_backend *b = &f->backend;
    b->kind = "fake";
    b->context = f;
    b->device_count = fake_device_count;
    b->why_unavailable = fake_why_unavailable;
    b->device_info = fake_device_info;
    b->allocate = fake_allocate;
    b->release = fake_release;
    b->host_buffer_alloc = fake_buffer_alloc;
    b->host_buffer_free = fake_buffer_free;
    b->copy = fake_copy;
    b->wait = fake_wait;
    b->streams = 2;
    b->finish = fake_finish;
    b->export_fd = fake_export_fd;
    b->destroy = fake_destroy;
    return b;
}
