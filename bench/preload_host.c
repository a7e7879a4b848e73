/* bench/preload_host: host preload GB/s (the manager's copy engine: workers pread
 * straight into a writable mapping of a memfd, then it is unmapped and sealed; and,
 * for comparison, the two-copy path: pread into bounce buffers, pwrite) of a 1 GiB file
 * (BENCH_QUICK=1: 256 MiB; or the MiB given as argv[1]) next to memcpy GB/s measured in the same
 * run. The file is written first (as a blob of a local blob store in a temporary
 * directory), so it is read from the page cache: this is the engine's cost, not the
 * disk's. Figures never fail the run. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_result.h"
#include "blobstore.h"
#include "log.h"
#include "preload.h"
#include "sha256.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    size_t mib = getenv("BENCH_QUICK") ? 256 : 1024;
    if (argc > 1)
        mib = (size_t)strtoul(argv[1], NULL, 10);
    if (mib < 16 || mib > 8192) {
        fprintf(stderr, "usage: %s [MiB, 16..8192]\n", argv[0]);
        return 2;
    }
    size_t bytes = mib << 20;
    tg_log_set_level(TG_LOG_WARN);
    char dir[] = "/tmp/tg-bench-preload-XXXXXX", open_err[256], blob[TG_SHA256_HEX_LEN + 1];
    tg_blobstore *blobs = NULL;
    unsigned char *buffer = malloc(bytes), *copy = malloc(bytes);
    if (mkdtemp(dir) == NULL || tg_blobstore_open(dir, &blobs, open_err, sizeof open_err) != 0 ||
        buffer == NULL || copy == NULL) {
        fprintf(stderr, "preload_host: cannot set up %zu MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < bytes; i++)
        buffer[i] = (unsigned char)(i * 2654435761u >> 13);
    tg_blob_writer *writer = NULL;
    bool written = tg_sha256_hex(buffer, bytes, blob, "bench") == 0 &&
                   tg_blob_write_begin(blobs, &writer) == TG_STORE_OK &&
                   tg_blob_write(writer, buffer, bytes) == TG_STORE_OK;
    if (!written || tg_blob_write_commit(writer, blob) != TG_STORE_OK) {
        if (!written)
            tg_blob_write_abort(writer);
        fprintf(stderr, "preload_host: cannot write the file\n");
        return 1;
    }

    /* Anchor: memcpy of the same size (best of 3, the destination touched first). */
    memset(copy, 1, bytes);
    double memcpy_best = 1e9;
    for (int round = 0; round < 3; round++) {
        double start = now_seconds();
        memcpy(copy, buffer, bytes);
        double seconds = now_seconds() - start;
        if (seconds < memcpy_best)
            memcpy_best = seconds;
    }
    unsigned sink = copy[bytes / 3];
    free(copy);

    double memcpy_gbps = (double)bytes / memcpy_best / 1e9;
    /* The preload: 64 tensors (16 MiB each for 1 GiB), best of 3 loads; first the
     * one-copy path (map_for_fill), then the bounce-buffer path (no map_for_fill). */
    for (int mode = 0; mode < 2; mode++) {
        unsigned threads = 4;
        tg_preload_manager_config config = {.host = tg_preload_host_backend(),
                                            .host_budget = (uint64_t)bytes * 2,
                                            .copy_threads = threads};
        if (config.host != NULL && mode == 1)
            config.host->map_for_fill = NULL;
        tg_preload_manager *manager = NULL;
        char err[300];
        if (tg_preload_manager_create(&config, &manager, err, sizeof err) != 0) {
            fprintf(stderr, "preload_host: %s\n", err);
            return 1;
        }
        enum { TENSORS = 64 };
        uint64_t shapes[TENSORS][1];
        tg_preload_source_tensor tensors[TENSORS];
        uint64_t each = bytes / TENSORS;
        for (int i = 0; i < TENSORS; i++) {
            shapes[i][0] = each;
            tensors[i] =
                (tg_preload_source_tensor){"t", ST_U8, 1, shapes[i], 0, (uint64_t)i * each, each};
        }
        const char *files[] = {blob};
        tg_preload_request request = {"bench/preload", 1,       "host",  false, ST_U8, blobs, 1,
                                      files,           TENSORS, tensors, NULL,  0,     0,     NULL};
        double best_gbps = 0, best_wall = 1e9;
        for (int round = 0; round < 3; round++) {
            char id[TG_PRELOAD_ID_LEN + 1];
            double start = now_seconds();
            if (tg_preload_submit(manager, &request, id, err, sizeof err) != TG_PRELOAD_OK) {
                fprintf(stderr, "preload_host: %s\n", err);
                return 1;
            }
            const char *state = tg_preload_wait(manager, id, 120000);
            double wall = now_seconds() - start;
            json_t *described = tg_preload_describe(manager, id, false);
            double gbps = json_real_value(json_object_get(described, "gbps"));
            json_decref(described);
            if (state == NULL || strcmp(state, "resident") != 0) {
                fprintf(stderr, "preload_host: the load ended %s\n",
                        state ? state : "in a timeout");
                return 1;
            }
            if (gbps > best_gbps)
                best_gbps = gbps;
            if (wall < best_wall)
                best_wall = wall;
            bool deferred;
            tg_preload_evict(manager, id, &deferred);
        }
        tg_preload_manager_destroy(manager);
        printf("preload host %zu MiB, %u copy threads, %s: %.1f GB/s copy, %.1f GB/s incl. "
               "allocate+seal "
               "(anchor memcpy: %.1f GB/s, ratio %.2f) (sink %u)\n",
               mib, threads, mode == 0 ? "pread into the memfd mapping" : "bounce buffers + pwrite",
               best_gbps, (double)bytes / best_wall / 1e9, memcpy_gbps, best_gbps / memcpy_gbps,
               sink);
        bench_result(mode == 0 ? "preload host, pread into the memfd mapping"
                               : "preload host, bounce buffers + pwrite",
                     best_gbps, "GB/s", "memcpy to warm memory", memcpy_gbps);
    }
    tg_blob_remove(blobs, blob);
    tg_blobstore_close(blobs);
    char command[64];
    snprintf(command, sizeof command, "rm -rf %s", dir);
    if (system(command) != 0)
        fprintf(stderr, "preload_host: could not remove %s\n", dir);
    free(buffer);
    return 0;
}
