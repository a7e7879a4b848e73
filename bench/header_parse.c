/* Benchmark: strict header parse of a 100,000-tensor header, next to jansson's
 * json_loadb (JSON_REJECT_DUPLICATES, as used for every other JSON) on the same
 * bytes as the anchor. Two layouts: the reference writer's order (sorted by
 * name, offsets ascending) and layer order (offsets ascending, names not sorted).
 * Prints one line per layout; runs a few seconds in all. */
#include <jansson.h>
#include <stdio.h>

#include "bench_result.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "st_header.h"

#define TENSORS 100000

static const char *const parts[] = {
    "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.o_proj.weight", "mlp.gate_proj.weight",    "mlp.up_proj.weight",
    "mlp.down_proj.weight",    "input_layernorm.weight",  "post_attention_layernorm.weight",
    "self_attn.q_norm.weight",
};
static const unsigned long long shapes[][2] = {
    {4096, 4096},  {1024, 4096},  {1024, 4096}, {4096, 4096}, {14336, 4096},
    {14336, 4096}, {4096, 14336}, {4096, 1},    {4096, 1},    {128, 1},
};

typedef struct entry {
    char name[64];
    int part;
} entry;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->name, ((const entry *)b)->name);
}

/* Wall clock bounds each loop; the figures use this process's CPU time, which
 * stays meaningful on a shared, busy machine (the parse is single-threaded). */
static double clock_seconds(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static double now(void)
{
    return clock_seconds(CLOCK_MONOTONIC);
}
static double cpu(void)
{
    return clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
}

/* Builds a whole file prefix (8-byte length + header); *data_size gets the data length. */
static unsigned char *build(entry *entries, size_t *len, unsigned long long *data_size)
{
    size_t cap = 32u << 20;
    unsigned char *buf = malloc(cap);
    char *h = (char *)buf + 8;
    size_t n = (size_t)snprintf(h, cap - 8, "{\"__metadata__\":{\"format\":\"pt\"}");
    unsigned long long offset = 0;
    for (size_t i = 0; i < TENSORS; i++) {
        const unsigned long long *s = shapes[entries[i].part];
        unsigned long long bytes = s[0] * s[1] * 2;
        if (s[1] == 1)
            n += (size_t)snprintf(
                h + n, cap - 8 - n,
                ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%llu],\"data_offsets\":[%llu,%llu]}",
                entries[i].name, s[0], offset, offset + bytes);
        else
            n += (size_t)snprintf(
                h + n, cap - 8 - n,
                ",\"%s\":{\"dtype\":\"BF16\",\"shape\":[%llu,%llu],\"data_offsets\":[%llu,%llu]}",
                entries[i].name, s[0], s[1], offset, offset + bytes);
        offset += bytes;
    }
    h[n++] = '}';
    while ((8 + n) % 8 != 0)
        h[n++] = ' ';
    for (int k = 0; k < 8; k++)
        buf[k] = (unsigned char)((unsigned long long)n >> (8 * k));
    *len = 8 + n;
    *data_size = offset;
    return buf;
}

static int run(const char *label, entry *entries)
{
    size_t len;
    unsigned long long data_size;
    unsigned char *buf = build(entries, &len, &data_size);
    size_t header_len = len - 8;
    uint64_t file_size = len + data_size;

    st_file f;
    st_error err;
    if (st_header_parse(buf, len, file_size, NULL, &f, &err) != ST_OK) {
        fprintf(stderr, "%s: parse failed: %s: %s\n", label, st_reason_name(err.reason),
                err.detail);
        return 1;
    }
    if (f.tensor_count != TENSORS) {
        fprintf(stderr, "%s: %zu tensors\n", label, f.tensor_count);
        return 1;
    }
    st_file_free(&f);

    int parses = 0;
    double start = now(), cpu_start = cpu();
    do {
        st_header_parse(buf, len, file_size, NULL, &f, &err);
        st_file_free(&f);
        parses++;
    } while (now() - start < 1.5);
    double ours = (cpu() - cpu_start) / parses;

    int loads = 0;
    start = now();
    cpu_start = cpu();
    do {
        json_error_t jerr;
        json_t *root = json_loadb((const char *)buf + 8, header_len, JSON_REJECT_DUPLICATES, &jerr);
        if (root == NULL) {
            fprintf(stderr, "%s: jansson refused: %s\n", label, jerr.text);
            return 1;
        }
        json_decref(root);
        loads++;
    } while (now() - start < 1.0);
    double anchor = (cpu() - cpu_start) / loads;

    printf("%s: %.1f MB/s, %.2f ms/parse (anchor jansson json_loadb same bytes: %.1f MB/s; "
           "ratio %.1fx) [%zu header bytes, %d parses, CPU time]\n",
           label, (double)header_len / ours / 1e6, ours * 1e3, (double)header_len / anchor / 1e6,
           anchor / ours, header_len, parses);
    bench_result(label, (double)header_len / ours / 1e6, "MB/s", "jansson json_loadb same bytes",
                 (double)header_len / anchor / 1e6);
    free(buf);
    return 0;
}

int main(void)
{
    entry *entries = malloc(TENSORS * sizeof *entries);
    for (size_t i = 0; i < TENSORS; i++) {
        size_t layer = i / 10, part = i % 10;
        snprintf(entries[i].name, sizeof entries[i].name, "model.layers.%zu.%s", layer,
                 parts[part]);
        entries[i].part = (int)part;
    }
    /* layer order first: names are not sorted (layers.10 comes after layers.9) */
    int status = run("header_parse_100k_layer_order", entries);
    qsort(entries, TENSORS, sizeof *entries, by_name);
    status |= run("header_parse_100k", entries);
    free(entries);
    return status;
}
