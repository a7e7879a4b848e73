/* bench/preload_cuda: GB/s of the CUDA preload path next to its anchors, measured
 * in the same run on the same device and the same file:
 *   ceiling  one pinned 64 MiB buffer copied again and again with cuMemcpyHtoDAsync
 *            (the host-to-device limit of the link, ~55 GB/s on PCIe Gen5 x16);
 *   preload  the file's data section through the backend: 4 threads pread into
 *            pinned bounce buffers (two per thread), each thread copying on its
 *            own stream, as the preload manager's copy engine does (docs/DESIGN.md §6);
 *   torch    /usr/bin/python3: the same tensors read from the same file into CPU
 *            tensors, then .to("cuda") and a synchronize.
 * The file is written first, so every reader sees a warm page cache.
 * Without a CUDA driver it prints "preload_cuda: skipped (no CUDA driver: ...)"
 * and exits 0. Figures never decide pass or fail.
 * Env: BENCH_QUICK=1 (256 MiB instead of 2 GiB), PRELOAD_CUDA_BYTES, PRELOAD_CUDA_DIR,
 * PYTHON (default /usr/bin/python3). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "preload_cuda.h"

#define CHUNK_BYTES ((size_t)8 << 20)
#define CEILING_BUFFER ((size_t)64 << 20)
#define TENSOR_BYTES ((uint64_t)64 << 20) /* F32 [16384, 1024] */
#define THREADS TG_PRELOAD_CUDA_STREAMS

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Writes a valid safetensors file of `tensors` F32 tensors of 64 MiB; returns the
 * data section's offset in the file, or 0 on failure. */
static uint64_t write_file(const char *path, unsigned tensors)
{
    size_t cap = 64 + (size_t)tensors * 128;
    char *header = malloc(cap);
    char *block = malloc(CHUNK_BYTES);
    if (header == NULL || block == NULL) {
        free(header);
        free(block);
        return 0;
    }
    size_t len = (size_t)snprintf(header, cap, "{");
    for (unsigned i = 0; i < tensors; i++)
        len += (size_t)snprintf(header + len, cap - len,
                                "%s\"layer.%u.weight\":{\"dtype\":\"F32\",\"shape\":[16384,1024],"
                                "\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}",
                                i ? "," : "", i, i * TENSOR_BYTES, (i + 1) * TENSOR_BYTES);
    len += (size_t)snprintf(header + len, cap - len, "}");
    /* Spaces after the JSON so the data section starts at a multiple of 8. */
    while ((8 + len) % 8 != 0)
        header[len++] = ' ';
    uint64_t n = len;
    unsigned char prefix[8];
    for (int i = 0; i < 8; i++)
        prefix[i] = (unsigned char)(n >> (8 * i));
    FILE *f = fopen(path, "wb");
    int ok = f != NULL && fwrite(prefix, 1, 8, f) == 8 && fwrite(header, 1, len, f) == len;
    uint64_t total = (uint64_t)tensors * TENSOR_BYTES;
    for (uint64_t done = 0; ok && done < total; done += CHUNK_BYTES) {
        float *values = (float *)(void *)block;
        for (size_t i = 0; i < CHUNK_BYTES / 4; i++)
            values[i] = (float)((done / 4 + i) % 1000) * 0.001f;
        ok = fwrite(block, 1, CHUNK_BYTES, f) == CHUNK_BYTES;
    }
    if (f != NULL && fclose(f) != 0)
        ok = 0;
    free(header);
    free(block);
    return ok ? 8 + n : 0;
}

typedef struct worker {
    tg_device_backend *backend;
    tg_device_allocation *allocation;
    int fd;
    uint64_t data_start, data_bytes;
    int index; /* thread and stream */
    void *buffers[2];
    int status;
    char err[256];
} worker;

/* Chunks index, index+THREADS, ...: pread into one buffer while the other's copy
 * runs; wait(stream) before issuing a copy means the buffer about to be refilled
 * next has finished copying. */
static void *worker_run(void *argument)
{
    worker *w = argument;
    tg_device_backend *b = w->backend;
    unsigned turn = 0;
    for (uint64_t offset = (uint64_t)w->index * CHUNK_BYTES; offset < w->data_bytes;
         offset += (uint64_t)THREADS * CHUNK_BYTES, turn ^= 1) {
        size_t len =
            (size_t)(w->data_bytes - offset < CHUNK_BYTES ? w->data_bytes - offset : CHUNK_BYTES);
        size_t got = 0;
        while (got < len) {
            ssize_t n = pread(w->fd, (char *)w->buffers[turn] + got, len - got,
                              (off_t)(w->data_start + offset + got));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0) {
                snprintf(w->err, sizeof w->err, "pread: %s",
                         n == 0 ? "short file" : strerror(errno));
                w->status = -1;
                return NULL;
            }
            got += (size_t)n;
        }
        if (b->wait(b->context, w->index, w->err, sizeof w->err) != 0 ||
            b->copy(b->context, w->allocation, offset, w->buffers[turn], len, w->index, w->err,
                    sizeof w->err) != 0) {
            w->status = -1;
            return NULL;
        }
    }
    w->status = b->wait(b->context, w->index, w->err, sizeof w->err);
    return NULL;
}

static int run_preload(tg_device_backend *b, tg_device_allocation *allocation, const char *path,
                       uint64_t data_start, uint64_t data_bytes, double *seconds)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "preload_cuda: %s: %s\n", path, strerror(errno));
        return -1;
    }
    worker workers[THREADS];
    pthread_t threads[THREADS];
    int status = 0;
    memset(workers, 0, sizeof workers);
    for (int t = 0; t < THREADS; t++) {
        workers[t] = (worker){.backend = b,
                              .allocation = allocation,
                              .fd = fd,
                              .data_start = data_start,
                              .data_bytes = data_bytes,
                              .index = t};
        for (int k = 0; k < 2; k++)
            if ((workers[t].buffers[k] = b->host_buffer_alloc(b->context, CHUNK_BYTES)) == NULL)
                status = -1;
    }
    if (status != 0)
        fprintf(stderr, "preload_cuda: cannot pin the bounce buffers\n");
    double start = now_seconds();
    int started = 0;
    for (; status == 0 && started < THREADS; started++)
        if (pthread_create(&threads[started], NULL, worker_run, &workers[started]) != 0)
            status = -1;
    for (int t = 0; t < started; t++) {
        pthread_join(threads[t], NULL);
        if (workers[t].status != 0) {
            fprintf(stderr, "preload_cuda: worker %d: %s\n", t, workers[t].err);
            status = -1;
        }
    }
    char err[256];
    if (status == 0 && b->finish(b->context, allocation, err, sizeof err) != 0) {
        fprintf(stderr, "preload_cuda: finish: %s\n", err);
        status = -1;
    }
    *seconds = now_seconds() - start;
    for (int t = 0; t < THREADS; t++)
        for (int k = 0; k < 2; k++)
            if (workers[t].buffers[k] != NULL)
                b->host_buffer_free(b->context, workers[t].buffers[k], CHUNK_BYTES);
    close(fd);
    return status;
}

static int run_ceiling(tg_device_backend *b, tg_device_allocation *allocation, uint64_t bytes,
                       double *seconds)
{
    void *buffer = b->host_buffer_alloc(b->context, CEILING_BUFFER);
    if (buffer == NULL) {
        fprintf(stderr, "preload_cuda: cannot pin %zu bytes\n", CEILING_BUFFER);
        return -1;
    }
    memset(buffer, 0x3c, CEILING_BUFFER);
    char err[256];
    int status = 0;
    double start = now_seconds();
    for (uint64_t offset = 0; status == 0 && offset < bytes; offset += CEILING_BUFFER) {
        size_t len = (size_t)(bytes - offset < CEILING_BUFFER ? bytes - offset : CEILING_BUFFER);
        status = b->copy(b->context, allocation, offset, buffer, len, 0, err, sizeof err);
    }
    if (status == 0)
        status = b->wait(b->context, 0, err, sizeof err);
    *seconds = now_seconds() - start;
    if (status != 0)
        fprintf(stderr, "preload_cuda: ceiling: %s\n", err);
    b->host_buffer_free(b->context, buffer, CEILING_BUFFER);
    return status;
}

/* The torch anchor in a child python; it prints "seconds bytes" on its last line. */
static const char torch_script[] =
    "import json, os, struct, sys, time\n"
    "import torch\n"
    "if not torch.cuda.is_available(): print('torch has no CUDA'); sys.exit(0)\n"
    "torch.zeros(1, device='cuda'); torch.cuda.synchronize()\n"
    "path = sys.argv[1]\n"
    "start = time.perf_counter()\n"
    "with open(path, 'rb') as f:\n"
    "    n = struct.unpack('<Q', f.read(8))[0]\n"
    "    header = json.loads(f.read(n))\n"
    "    data = bytearray(os.path.getsize(path) - 8 - n)\n"
    "    f.readinto(data)\n"
    "total = 0\n"
    "out = {}\n"
    "for name, t in header.items():\n"
    "    if name == '__metadata__': continue\n"
    "    b, e = t['data_offsets']\n"
    "    cpu = torch.frombuffer(data, dtype=torch.float32, offset=b, count=(e - b) // 4)\n"
    "    out[name] = cpu.view(t['shape']).to('cuda')\n"
    "    total += e - b\n"
    "torch.cuda.synchronize()\n"
    "print('%.6f %d' % (time.perf_counter() - start, total))\n";

static void run_torch(const char *path, double ceiling_gbs)
{
    const char *python = getenv("PYTHON") ? getenv("PYTHON") : "/usr/bin/python3";
    char script_path[4096];
    snprintf(script_path, sizeof script_path, "%s.py", path);
    FILE *f = fopen(script_path, "w");
    if (f == NULL || fputs(torch_script, f) == EOF || fclose(f) != 0) {
        printf("torch (file -> CPU tensors -> .to(\"cuda\")): skipped (cannot write %s)\n",
               script_path);
        return;
    }
    char command[8400];
    snprintf(command, sizeof command, "'%s' '%s' '%s' 2>&1", python, script_path, path);
    FILE *child = popen(command, "r");
    char line[512] = "", last[512] = "";
    while (child != NULL && fgets(line, sizeof line, child) != NULL)
        snprintf(last, sizeof last, "%s", line);
    int status = child ? pclose(child) : -1;
    unlink(script_path);
    last[strcspn(last, "\n")] = '\0';
    double seconds = 0;
    uint64_t bytes = 0;
    if (status != 0 || sscanf(last, "%lf %" SCNu64, &seconds, &bytes) != 2 || seconds <= 0) {
        printf("torch (file -> CPU tensors -> .to(\"cuda\")): skipped (%s)\n",
               last[0] ? last : "python did not run");
        return;
    }
    double gbs = (double)bytes / seconds / 1e9;
    printf("torch (file -> CPU tensors -> .to(\"cuda\")): %.2f GB/s (%.0f%% of the ceiling)\n", gbs,
           100.0 * gbs / ceiling_gbs);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    tg_device_backend *b = tg_preload_cuda_backend();
    if (b == NULL) {
        fprintf(stderr, "preload_cuda: out of memory\n");
        return 1;
    }
    if (b->device_count(b->context) == 0) {
        printf("preload_cuda: skipped (no CUDA driver: %s)\n", b->why_unavailable(b->context));
        b->destroy(b->context);
        return 0;
    }
    uint64_t bytes = getenv("BENCH_QUICK") ? (uint64_t)256 << 20 : (uint64_t)2 << 30;
    if (getenv("PRELOAD_CUDA_BYTES"))
        bytes = strtoull(getenv("PRELOAD_CUDA_BYTES"), NULL, 10);
    unsigned tensors = (unsigned)((bytes + TENSOR_BYTES - 1) / TENSOR_BYTES);
    if (tensors == 0)
        tensors = 1;
    bytes = (uint64_t)tensors * TENSOR_BYTES;

    tg_device_info info;
    if (b->device_info(b->context, 0, &info) != 0)
        snprintf(info.name, sizeof info.name, "?");
    const char *dir = getenv("PRELOAD_CUDA_DIR") ? getenv("PRELOAD_CUDA_DIR") : "/tmp";
    char path[4000];
    snprintf(path, sizeof path, "%s/tensorgate-preload-cuda-%d.safetensors", dir, (int)getpid());
    printf("preload_cuda: cuda:0 %s (%s), %.2f GiB file of %u F32 tensors, %d streams, %zu MiB "
           "chunks, warm page cache\n",
           info.name, info.uuid, (double)bytes / (1 << 30), tensors, THREADS, CHUNK_BYTES >> 20);
    uint64_t data_start = write_file(path, tensors);
    int status = 1;
    tg_device_allocation allocation = {0};
    char err[256];
    if (data_start == 0) {
        fprintf(stderr, "preload_cuda: cannot write %s\n", path);
        goto out;
    }
    if (b->allocate(b->context, 0, bytes, &allocation, err, sizeof err) != 0) {
        fprintf(stderr, "preload_cuda: allocate: %s\n", err);
        goto out;
    }
    double ceiling_seconds = 0, preload_seconds = 0;
    /* A warm-up of the ceiling first so context and pinning costs stay out of it. */
    if (run_ceiling(b, &allocation, CEILING_BUFFER, &ceiling_seconds) != 0 ||
        run_ceiling(b, &allocation, bytes, &ceiling_seconds) != 0)
        goto out;
    b->release(b->context, &allocation);
    /* Each preload gets a fresh allocation, as a real one does (allocation time is
     * not counted); the first, one tensor long, is a warm-up. */
    uint64_t lengths[2] = {TENSOR_BYTES, bytes};
    for (int run = 0; run < 2; run++) {
        if (b->allocate(b->context, 0, bytes, &allocation, err, sizeof err) != 0) {
            fprintf(stderr, "preload_cuda: allocate: %s\n", err);
            goto out;
        }
        if (run_preload(b, &allocation, path, data_start, lengths[run], &preload_seconds) != 0)
            goto out;
        b->release(b->context, &allocation);
    }
    double ceiling_gbs = (double)bytes / ceiling_seconds / 1e9;
    double preload_gbs = (double)bytes / preload_seconds / 1e9;
    printf("h2d ceiling (pinned 64 MiB buffer, cuMemcpyHtoDAsync): %.2f GB/s\n", ceiling_gbs);
    printf("preload (pread -> pinned ring -> %d streams): %.2f GB/s (%.0f%% of the ceiling)\n",
           THREADS, preload_gbs, 100.0 * preload_gbs / ceiling_gbs);
    run_torch(path, ceiling_gbs);
    status = 0;
out:
    if (allocation.handle != NULL)
        b->release(b->context, &allocation);
    unlink(path);
    b->destroy(b->context);
    return status;
}
