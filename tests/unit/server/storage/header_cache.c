/* Unit tests for server/storage/header_cache.c: misses, a copy per get, the key being
 * the pair (sha256, path), a second put replacing the first, texts with NUL bytes,
 * what is never kept (over an eighth of the budget, a key that is no digest),
 * least-recently-used eviction at the 32 MiB budget with a get refreshing an entry,
 * and 8 threads putting and getting at once while a small budget evicts (run under
 * ASan+UBSan by make test). Each test makes its own cache. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "header_cache.h"
#include "sha256.h"
#include "test.h"

static tg_header_cache *cache;

/* Replaces the cache by an empty one of `bytes`. */
static void renew(size_t bytes)
{
    tg_header_cache_destroy(cache);
    cache = tg_header_cache_create(bytes);
    CHECK(cache != NULL);
}

/* A made-up digest for number k. */
static void sha_name(unsigned k, char out[TG_SHA256_HEX_LEN + 1])
{
    snprintf(out, TG_SHA256_HEX_LEN + 1, "%064x", k);
}

/* The cached text of (sha k, path) equals want (want_len bytes); want NULL: a miss. */
static void check_get(unsigned k, const char *path, const char *want, size_t want_len)
{
    char sha[TG_SHA256_HEX_LEN + 1];
    sha_name(k, sha);
    size_t len = 12345;
    char *got = tg_header_cache_get(cache, sha, path, &len);
    if (want == NULL) {
        CHECK(got == NULL);
        CHECK_EQ_U64(len, 12345); /* untouched on a miss */
        return;
    }
    CHECK(got != NULL);
    if (got == NULL)
        return;
    CHECK_EQ_U64(len, want_len);
    CHECK(memcmp(got, want, want_len) == 0);
    CHECK(got[want_len] == '\0');
    free(got);
}

static void put(unsigned k, const char *path, const char *text, size_t len)
{
    char sha[TG_SHA256_HEX_LEN + 1];
    sha_name(k, sha);
    tg_header_cache_put(cache, sha, path, text, len);
}

TEST(get_and_put)
{
    renew(TG_HEADER_CACHE_BYTES);
    check_get(1, "model.safetensors", NULL, 0);
    put(1, "model.safetensors", "{\"a\":1}", 7);
    check_get(1, "model.safetensors", "{\"a\":1}", 7);
    /* each get is a copy the caller owns */
    char sha[TG_SHA256_HEX_LEN + 1];
    sha_name(1, sha);
    size_t len = 0;
    char *a = tg_header_cache_get(cache, sha, "model.safetensors", &len);
    char *b = tg_header_cache_get(cache, sha, "model.safetensors", &len);
    CHECK(a != NULL && b != NULL && a != b);
    if (a != NULL)
        a[0] = 'X';
    check_get(1, "model.safetensors", "{\"a\":1}", 7);
    free(a);
    free(b);

    /* the key is the pair: same blob under another path, another blob under the path */
    check_get(1, "other.safetensors", NULL, 0);
    check_get(2, "model.safetensors", NULL, 0);
    put(1, "other.safetensors", "other", 5);
    put(2, "model.safetensors", "two", 3);
    check_get(1, "model.safetensors", "{\"a\":1}", 7);
    check_get(1, "other.safetensors", "other", 5);
    check_get(2, "model.safetensors", "two", 3);
    /* paths that differ only past a prefix, and the empty path */
    put(1, "model.safetensors.bak", "bak", 3);
    put(1, "", "empty", 5);
    check_get(1, "model.safetensors", "{\"a\":1}", 7);
    check_get(1, "model.safetensors.bak", "bak", 3);
    check_get(1, "", "empty", 5);
    check_get(1, "model", NULL, 0);

    /* a second put replaces the text */
    put(1, "model.safetensors", "{\"a\":2,\"b\":3}", 13);
    check_get(1, "model.safetensors", "{\"a\":2,\"b\":3}", 13);

    /* bytes after a NUL are kept; an empty text is a hit */
    put(3, "nul", "a\0b\0c", 5);
    check_get(3, "nul", "a\0b\0c", 5);
    put(3, "empty", "", 0);
    check_get(3, "empty", "", 0);

    renew(TG_HEADER_CACHE_BYTES);
    check_get(1, "model.safetensors", NULL, 0);
    check_get(3, "nul", NULL, 0);
}

TEST(not_kept)
{
    renew(TG_HEADER_CACHE_BYTES);
    /* over an eighth of the budget */
    size_t big = TG_HEADER_CACHE_BYTES / 8;
    char *text = malloc(big);
    CHECK(text != NULL);
    if (text == NULL)
        return;
    memset(text, 'x', big);
    put(1, "big", text, big);
    check_get(1, "big", NULL, 0);
    /* a little under it is kept */
    size_t fits = big - 4096;
    put(1, "fits", text, fits);
    check_get(1, "fits", text, fits);
    free(text);
    /* a key that is no digest */
    tg_header_cache_put(cache, "abc", "p", "t", 1);
    size_t len = 0;
    char *got = tg_header_cache_get(cache, "abc", "p", &len);
    CHECK(got == NULL);
    free(got);
    renew(TG_HEADER_CACHE_BYTES);
}

/* 1 MiB texts fill the 32 MiB budget: the least recently used leave first. */
TEST(eviction)
{
    renew(TG_HEADER_CACHE_BYTES);
    size_t size = (size_t)1024 * 1024;
    char *text = malloc(size);
    CHECK(text != NULL);
    if (text == NULL)
        return;
    unsigned count = (unsigned)(TG_HEADER_CACHE_BYTES / size) + 8; /* 40 */
    for (unsigned k = 0; k < count; k++) {
        memset(text, 'a' + (int)(k % 26), size);
        put(k, "f", text, size);
        if (k == 20) {
            /* refresh entry 0 (nothing was evicted yet): 1, 2, ... go before it */
            memset(text, 'a', size);
            check_get(0, "f", text, size);
        }
    }
    /* a charge is a little over 1 MiB, so 31 fit: the 9 oldest left, 0 excepted */
    for (unsigned k = 0; k < count; k++) {
        bool kept = k == 0 || k >= 10;
        memset(text, 'a' + (int)(k % 26), size);
        check_get(k, "f", kept ? text : NULL, size);
    }
    free(text);
    renew(TG_HEADER_CACHE_BYTES);
}

typedef struct worker {
    unsigned id;
    unsigned hits;
    unsigned wrong; /* a hit whose text is not the key's */
} worker;

static void *hammer(void *arg)
{
    worker *w = arg;
    char path[32], text[600];
    for (unsigned i = 0; i < 3000; i++) {
        unsigned k = (i * 7 + w->id) % 50;
        snprintf(path, sizeof path, "p%u", i % 3);
        int n = snprintf(text, sizeof text, "%u/%s", k, path);
        char sha[TG_SHA256_HEX_LEN + 1];
        sha_name(k, sha);
        size_t len = 0;
        char *got = tg_header_cache_get(cache, sha, path, &len);
        if (got != NULL) {
            /* whoever put it wrote the same text for the key */
            if (len == (size_t)n && memcmp(got, text, len) == 0)
                w->hits++;
            else
                w->wrong++;
            free(got);
        } else {
            tg_header_cache_put(cache, sha, path, text, (size_t)n);
            /* read back at once: a hit however the threads are scheduled (each thread
             * alone cycles through all 150 keys, which an LRU of a few dozen never
             * hits; on a loaded machine the threads may well run one at a time) */
            got = tg_header_cache_get(cache, sha, path, &len);
            if (got != NULL && len == (size_t)n && memcmp(got, text, len) == 0)
                w->hits++;
            else if (got != NULL)
                w->wrong++;
            free(got);
        }
    }
    return NULL;
}

TEST(threads)
{
    renew(8 * 1024); /* a few dozen of the 150 keys fit: entries leave while read */
    pthread_t threads[8];
    worker workers[8];
    for (unsigned t = 0; t < 8; t++) {
        workers[t] = (worker){t, 0, 0};
        CHECK(pthread_create(&threads[t], NULL, hammer, &workers[t]) == 0);
    }
    unsigned hits = 0, wrong = 0;
    for (unsigned t = 0; t < 8; t++) {
        pthread_join(threads[t], NULL);
        hits += workers[t].hits;
        wrong += workers[t].wrong;
    }
    CHECK(hits > 0);
    CHECK_EQ_U64(wrong, 0);
    renew(TG_HEADER_CACHE_BYTES);
}

int main(int argc, char **argv)
{
    (void)argc;
    RUN(get_and_put);
    RUN(not_kept);
    RUN(eviction);
    RUN(threads);
    tg_header_cache_destroy(cache);
    return test_report(argv[0]);
}
