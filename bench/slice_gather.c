/* Benchmark: st_slice_gather on a 256 MiB tensor held in memory, as U8 [8192, 32768],
 * BF16 [8192, 16384] and F32 [8192, 8192] (1-, 2- and 4-byte elements).
 *
 * For each slice it prints the gather rate in GB/s of output bytes next to the anchor
 * measured in the same run: memcpy of the same number of bytes between the same
 * buffers. Best of a few repetitions for both, so page faults (the output buffer is
 * touched first) and noise do not decide the figure. Runs in a few seconds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_result.h"
#include "st_slice.h"

#define ROWS 8192
#define COLS 8192
#define REPETITIONS 5

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* keeps the compiler from treating a copy as dead */
static volatile uint8_t sink;

int main(void)
{
    const size_t tensor_bytes = (size_t)ROWS * COLS * sizeof(float);
    uint8_t *tensor = malloc(tensor_bytes);
    uint8_t *out = malloc(tensor_bytes);
    if (tensor == NULL || out == NULL) {
        fprintf(stderr, "slice_gather: cannot allocate 2 x 256 MiB\n");
        return 1;
    }
    for (size_t i = 0; i < tensor_bytes; i++)
        tensor[i] = (uint8_t)(i * 131 + (i >> 12));
    memset(out, 0, tensor_bytes);

    /* the same 256 MiB as U8 [8192, 32768], BF16 [8192, 16384], F32 [8192, 8192] */
    const struct {
        st_dtype dtype;
        const char *name;
        unsigned size;
    } types[] = {{ST_U8, "U8", 1}, {ST_BF16, "BF16", 2}, {ST_F32, "F32", 4}};
    int status = 0;
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        uint64_t cols = (uint64_t)COLS * 4 / types[t].size;
        const uint64_t shape[2] = {ROWS, cols};
        char column_block[64];
        snprintf(column_block, sizeof column_block, ":,%llu:%llu", (unsigned long long)(cols / 4),
                 (unsigned long long)(cols * 3 / 4));
        const char *slices[] = {"::2,::2",   column_block, "::-1",
                                "::-1,::-1", "::1,::4",    "100:4196"};
        for (size_t s = 0; s < sizeof slices / sizeof slices[0]; s++) {
            st_slice slice;
            st_slice_error err;
            if (st_slice_parse(slices[s], strlen(slices[s]), shape, 2, types[t].dtype, &slice,
                               &err) != ST_SLICE_OK) {
                fprintf(stderr, "slice_gather: %s: %s\n", slices[s], err.detail);
                status = 1;
                continue;
            }
            double best_gather = 1e30, best_copy = 1e30;
            for (int r = 0; r < REPETITIONS; r++) {
                double t0 = now_seconds();
                st_slice_gather(&slice, tensor, out);
                double t1 = now_seconds();
                sink = out[slice.out_bytes / 2];
                memcpy(out, tensor, slice.out_bytes);
                double t2 = now_seconds();
                sink = out[slice.out_bytes / 3];
                if (t1 - t0 < best_gather)
                    best_gather = t1 - t0;
                if (t2 - t1 < best_copy)
                    best_copy = t2 - t1;
            }
            /* spot check: the first and the last run of the selection */
            st_slice_gather(&slice, tensor, out);
            uint64_t last_run = st_slice_run_offset(&slice, slice.run_count - 1);
            if (memcmp(out, tensor + slice.first_offset, slice.run_bytes) != 0 ||
                memcmp(out + slice.out_bytes - slice.run_bytes, tensor + last_run,
                       slice.run_bytes) != 0) {
                fprintf(stderr, "slice_gather: %s %s: wrong values gathered\n", types[t].name,
                        slices[s]);
                status = 1;
            }
            double gather_rate = (double)slice.out_bytes / best_gather / 1e9;
            double copy_rate = (double)slice.out_bytes / best_copy / 1e9;
            printf("slice_gather %-4s %-16s %5.1f GB/s (anchor memcpy: %5.1f GB/s, ratio %.2f) "
                   "[%llu MiB out, %llu runs of %llu bytes]\n",
                   types[t].name, slices[s], gather_rate, copy_rate, gather_rate / copy_rate,
                   (unsigned long long)(slice.out_bytes >> 20), (unsigned long long)slice.run_count,
                   (unsigned long long)slice.run_bytes);
            char name[96];
            snprintf(name, sizeof name, "slice_gather %s %s", types[t].name, slices[s]);
            bench_result(name, gather_rate, "GB/s", "memcpy same output size", copy_rate);
        }
    }
    free(tensor);
    free(out);
    return status;
}
