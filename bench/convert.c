/* Conversion and NaN-counting throughput on 256 MiB of random finite F32, each figure
 * next to memcpy of the same 256 MiB measured in the same run (the anchor).
 * GB/s counts input bytes per second (1 GB = 1e9 bytes); best of a few repetitions,
 * every buffer touched before timing so page faults are not measured.
 * Usage: convert [MiB]   (default 256) */
#include <stdint.h>
#include <stdio.h>

#include "bench_result.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "st_convert.h"

#define REPEATS 3

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_state = 0x853C49E6748FEA9Bull;
static uint64_t next_random(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

struct job {
    st_dtype from, to; /* to == from: memcpy anchor; to == ST_BOOL: NaN counting */
    const void *src;
    void *dst;
    size_t n;
};

static uint64_t sink;

static void run_job(const struct job *job)
{
    if (job->to == job->from) {
        memcpy(job->dst, job->src, job->n * (st_dtype_bits(job->from) / 8));
    } else if (job->to == ST_BOOL) {
        uint64_t nan = 0, inf = 0;
        st_count_nonfinite(job->from, job->src, job->n, &nan, &inf);
        sink += nan + inf;
    } else {
        st_convert(job->from, job->to, job->src, job->dst, job->n);
    }
}

/* Best input GB/s over REPEATS runs. */
static double measure(const struct job *job)
{
    double best = 0;
    for (int r = 0; r < REPEATS; r++) {
        double start = now_seconds();
        run_job(job);
        double seconds = now_seconds() - start;
        double rate = (double)job->n * (st_dtype_bits(job->from) / 8) / seconds / 1e9;
        if (rate > best)
            best = rate;
    }
    return best;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 256;
    if (mib == 0 || mib > 4096) {
        fprintf(stderr, "usage: %s [MiB, 1..4096]\n", argv[0]);
        return 2;
    }
    size_t n = mib * 1024 * 1024 / 4;
    float *f32 = malloc(n * 4), *f32_out = malloc(n * 4);
    uint16_t *half = malloc(n * 2), *bf16 = malloc(n * 2);
    if (f32 == NULL || f32_out == NULL || half == NULL || bf16 == NULL) {
        fprintf(stderr, "out of memory for %zu MiB\n", mib);
        return 1;
    }
    /* weights-like magnitudes (2^-17 .. 2^2), random sign and mantissa: all finite,
     * all in F16 range, many F16 subnormals among them */
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_random();
        uint32_t bits = (uint32_t)(r & 0x807FFFFFu) | (uint32_t)(110 + (r >> 32) % 20) << 23;
        memcpy(&f32[i], &bits, 4);
    }
    memset(f32_out, 0, n * 4);
    memset(half, 0, n * 2);
    memset(bf16, 0, n * 2);
    st_convert(ST_F32, ST_F16, f32, half, n);
    st_convert(ST_F32, ST_BF16, f32, bf16, n);

    struct job anchor = {ST_F32, ST_F32, f32, f32_out, n};
    struct {
        const char *label;
        struct job job;
        bool portable;
    } cases[] = {
        {"convert F32->BF16", {ST_F32, ST_BF16, f32, bf16, n}, false},
        {"convert F32->F16", {ST_F32, ST_F16, f32, half, n}, false},
        {"convert BF16->F32", {ST_BF16, ST_F32, bf16, f32_out, n}, false},
        {"convert F16->F32", {ST_F16, ST_F32, half, f32_out, n}, false},
        {"count NaN/Inf F32", {ST_F32, ST_BOOL, f32, NULL, n}, false},
        {"count NaN/Inf BF16", {ST_BF16, ST_BOOL, bf16, NULL, n}, false},
        {"convert F32->BF16 (portable)", {ST_F32, ST_BF16, f32, bf16, n}, true},
        {"convert F32->F16 (portable)", {ST_F32, ST_F16, f32, half, n}, true},
        {"convert F16->F32 (portable)", {ST_F16, ST_F32, half, f32_out, n}, true},
        {"count NaN/Inf F32 (portable)", {ST_F32, ST_BOOL, f32, NULL, n}, true},
    };
    double total_start = now_seconds();
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        bool before = st_convert_force_portable(cases[k].portable);
        double rate = measure(&cases[k].job);
        st_convert_force_portable(before);
        /* the anchor is re-measured next to each figure, so drift shows in the ratio */
        double anchor_rate = measure(&anchor);
        printf("%s: %.1f GB/s in (anchor memcpy %zu MiB: %.1f GB/s, ratio %.2f)\n", cases[k].label,
               rate, mib, anchor_rate, rate / anchor_rate);
        bench_result(cases[k].label, rate, "GB/s", "memcpy", anchor_rate);
    }
    printf("total %.1f s (sink %llu)\n", now_seconds() - total_start, (unsigned long long)sink);
    free(f32);
    free(f32_out);
    free(half);
    free(bf16);
    return 0;
}
