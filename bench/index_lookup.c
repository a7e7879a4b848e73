/* Benchmark: finding a tensor's shard through a large *.safetensors.index.json
 * (120,000 weight_map names, about 16 MB, 160 shards), as GET .../tensors/{name}
 * does it. The anchor is what every GET did before the index cache: pread the whole
 * blob, json_loadb it (JSON_REJECT_DUPLICATES) and json_object_get the name. Next
 * to it: the first tg_index_cache_lookup (read, parse, build the map) and a cached
 * one (a binary search under the cache's mutex), on one thread and on 16. Prints
 * one line per figure; runs a few seconds. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>

#include "bench_result.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "blobstore.h"
#include "index_cache.h"

#define NAMES 120000
#define SHARDS 160
#define THREADS 16
#define CACHED_LOOKUPS 1000000

static tg_blobstore *store;
static tg_index_cache *cache;
static const char *sha = "1111111111111111111111111111111111111111111111111111111111111111";
static size_t index_size;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void name_of(unsigned i, char *out, size_t len)
{
    snprintf(out, len,
             "model.language_model.layers.%u.mlp.experts.%u.gate_up_proj.weight_scale_inv",
             i / 1000, i % 1000);
}

/* Writes the index into the store as blob `sha`; false on failure. */
static bool put_index(void)
{
    size_t cap = (size_t)NAMES * 160 + 64, len = 0;
    char *text = malloc(cap);
    if (text == NULL)
        return false;
    len += (size_t)snprintf(text, cap, "{\"metadata\":{\"total_size\":1},\"weight_map\":{");
    for (unsigned i = 0; i < NAMES; i++) {
        char name[128];
        name_of(i, name, sizeof name);
        len += (size_t)snprintf(text + len, cap - len,
                                "%s\n    \"%s\": \"model-%05u-of-%05u.safetensors\"", i ? "," : "",
                                name, i % SHARDS + 1, SHARDS);
    }
    len += (size_t)snprintf(text + len, cap - len, "\n  }\n}\n");
    tg_blob_writer *writer = NULL;
    bool ok = tg_blob_write_begin(store, &writer) == TG_STORE_OK &&
              tg_blob_write(writer, text, len) == TG_STORE_OK;
    ok = writer != NULL && (ok ? tg_blob_write_commit(writer, sha) == TG_STORE_OK
                               : (tg_blob_write_abort(writer), false));
    free(text);
    index_size = len;
    return ok;
}

/* The lookup every GET did before the cache. */
static bool uncached_lookup(const char *name, char *shard, size_t shard_len)
{
    tg_blob_check check;
    tg_blob_reader *blob = tg_blob_open(store, sha, TG_BLOB_SIZE_UNCHECKED, &check);
    if (blob == NULL)
        return false;
    char *text = malloc(index_size);
    size_t done = 0;
    while (text != NULL && done < index_size) {
        ssize_t n = tg_blob_read(blob, text + done, index_size - done, done);
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    tg_blob_close(blob);
    json_t *root = text ? json_loadb(text, done, JSON_REJECT_DUPLICATES, NULL) : NULL;
    free(text);
    const char *value =
        json_string_value(json_object_get(json_object_get(root, "weight_map"), name));
    bool found = value != NULL && (size_t)snprintf(shard, shard_len, "%s", value) < shard_len;
    json_decref(root);
    return found;
}

static unsigned next_random(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return *state >> 4;
}

/* Cached lookups of random names; returns the number that failed. */
static void *cached_lookups(void *arg)
{
    unsigned state = (unsigned)(size_t)arg, *failed = malloc(sizeof *failed);
    if (failed == NULL)
        return NULL;
    *failed = 0;
    for (unsigned i = 0; i < CACHED_LOOKUPS / THREADS; i++) {
        char name[128], shard[64];
        name_of(next_random(&state) % NAMES, name, sizeof name);
        if (tg_index_cache_lookup(cache, store, sha, index_size, name, shard, sizeof shard) !=
            TG_INDEX_FOUND)
            (*failed)++;
    }
    return failed;
}

int main(void)
{
    char root[64], err[256];
    snprintf(root, sizeof root, "/tmp/tg-bench-index-XXXXXX");
    if (mkdtemp(root) == NULL || tg_blobstore_open(root, &store, err, sizeof err) != 0 ||
        !put_index() ||
        (cache = tg_index_cache_create(TG_INDEX_CACHE_BYTES, TG_INDEX_CACHE_ENTRIES)) == NULL) {
        fprintf(stderr, "index_lookup: cannot set up the store in %s\n", root);
        return 1;
    }
    char name[128], shard[64];
    name_of(NAMES / 2, name, sizeof name);
    int reps = 5;
    double best_uncached = 1e9;
    for (int r = 0; r < reps; r++) {
        double t = now();
        if (!uncached_lookup(name, shard, sizeof shard)) {
            fprintf(stderr, "index_lookup: the uncached lookup failed\n");
            return 1;
        }
        double s = now() - t;
        best_uncached = s < best_uncached ? s : best_uncached;
    }
    double t = now();
    tg_index_lookup first =
        tg_index_cache_lookup(cache, store, sha, index_size, name, shard, sizeof shard);
    double first_s = now() - t;
    tg_index_cache_stats stats;
    tg_index_cache_stats_get(cache, &stats);

    t = now();
    void *one = cached_lookups((void *)1);
    double one_thread_s = now() - t;
    pthread_t threads[THREADS];
    t = now();
    for (size_t i = 0; i < THREADS; i++)
        pthread_create(&threads[i], NULL, cached_lookups, (void *)(i + 2));
    unsigned failed = one ? *(unsigned *)one : 1;
    for (size_t i = 0; i < THREADS; i++) {
        void *result;
        pthread_join(threads[i], &result);
        failed += result ? *(unsigned *)result : 1;
        free(result);
    }
    double many_s = now() - t;
    free(one);
    if (first != TG_INDEX_FOUND || failed != 0) {
        fprintf(stderr, "index_lookup: %u cached lookups failed\n", failed);
        return 1;
    }
    double per_lookup_us = one_thread_s / (CACHED_LOOKUPS / THREADS) * 1e6;
    printf("index of %d names, %.1f MB; the map keeps %.1f MB\n", NAMES, index_size / 1e6,
           stats.bytes / 1e6);
    printf("%-44s %10.1f ms   anchor: re-read + json_loadb per GET %8.1f ms  ratio %.2gx\n",
           "first lookup (read, parse, build the map)", first_s * 1e3, best_uncached * 1e3,
           first_s / best_uncached);
    bench_result("index first lookup", first_s * 1e3, "ms", "re-read + json_loadb per GET",
                 best_uncached * 1e3);
    bench_result("index cached lookup, 1 thread", per_lookup_us / 1e3, "ms",
                 "re-read + json_loadb per GET", best_uncached * 1e3);
    printf("%-44s %10.2f us   anchor: re-read + json_loadb per GET %8.1f ms  ratio %.2gx\n",
           "cached lookup, 1 thread", per_lookup_us, best_uncached * 1e3,
           per_lookup_us / (best_uncached * 1e6));
    printf("%-44s %10.2f M/s  (%d threads, %d lookups)\n", "cached lookups, all threads",
           CACHED_LOOKUPS / many_s / 1e6, THREADS, CACHED_LOOKUPS);
    tg_index_cache_destroy(cache);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", root);
    return system(command) == 0 ? 0 : 1;
}
