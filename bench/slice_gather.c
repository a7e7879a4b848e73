/* Benchmark: st_slice_gather on a 256 MiB F32 tensor [8192, 8192] held in memory.
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
    const uint64_t shape[2] = {ROWS, COLS};
    const size_t tensor_bytes = (size_t)ROWS * COLS * sizeof(float);
    float *tensor = malloc(tensor_bytes);
    uint8_t *out = malloc(tensor_bytes);
    if (tensor == NULL || out == NULL) {
        fprintf(stderr, "slice_gather: cannot allocate 2 x 256 MiB\n");
        return 1;
    }
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++)
        tensor[i] = (float)i;
    memset(out, 0, tensor_bytes);

    const char *slices[] = {"::2,::2", ":,100:4196", "::1,::4", "::-1,::-1", "100:4196"};
    int status = 0;
    for (size_t s = 0; s < sizeof slices / sizeof slices[0]; s++) {
        st_slice slice;
        st_slice_error err;
        if (st_slice_parse(slices[s], strlen(slices[s]), shape, 2, ST_F32, &slice, &err) !=
            ST_SLICE_OK) {
            fprintf(stderr, "slice_gather: %s: %s\n", slices[s], err.detail);
            status = 1;
            continue;
        }
        double best_gather = 1e30, best_copy = 1e30;
        for (int r = 0; r < REPETITIONS; r++) {
            double t0 = now_seconds();
            st_slice_gather(&slice, (const uint8_t *)tensor, out);
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
        /* spot check that the gather is right: first and last element of the selection */
        st_slice_gather(&slice, (const uint8_t *)tensor, out);
        float first, last;
        memcpy(&first, out, sizeof first);
        memcpy(&last, out + slice.out_bytes - sizeof last, sizeof last);
        uint64_t last_run = st_slice_run_offset(&slice, slice.run_count - 1);
        float want_first, want_last;
        memcpy(&want_first, (const uint8_t *)tensor + slice.first_offset, sizeof want_first);
        memcpy(&want_last, (const uint8_t *)tensor + last_run + slice.run_bytes - sizeof want_last,
               sizeof want_last);
        if (first != want_first || last != want_last) {
            fprintf(stderr, "slice_gather: %s: wrong values gathered\n", slices[s]);
            status = 1;
        }
        double gather_rate = (double)slice.out_bytes / best_gather / 1e9;
        double copy_rate = (double)slice.out_bytes / best_copy / 1e9;
        printf("slice_gather %s: %.1f GB/s (anchor memcpy: %.1f GB/s, ratio %.2f) "
               "[%llu MiB out, %llu runs of %llu bytes]\n",
               slices[s], gather_rate, copy_rate, gather_rate / copy_rate,
               (unsigned long long)(slice.out_bytes >> 20), (unsigned long long)slice.run_count,
               (unsigned long long)slice.run_bytes);
        char name[96];
        snprintf(name, sizeof name, "slice_gather F32 %s", slices[s]);
        bench_result(name, gather_rate, "GB/s", "memcpy same output size", copy_rate);
    }
    free(tensor);
    free(out);
    return status;
}
