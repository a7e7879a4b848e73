/* Unit tests for server/storage/index_cache.c: answers, hits without a second parse, both
 * bounds (entries and bytes) with least-recently-used eviction, an index too big to
 * read or to keep, malformed and unreadable blobs, and many threads looking up
 * while entries are evicted (run under ASan by make test). */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "blobstore.h"
#include "index_cache.h"
#include "store.h"
#include "test.h"

static tg_store store;
static tg_blobstore *blobs; /* the same directory, through the interface the caches use */
static char root[64];
static tg_index_cache *cache; /* each test makes its own (renew) */

/* Replaces the cache by an empty one with these bounds. */
static void renew(size_t bytes, size_t entries)
{
    tg_index_cache_destroy(cache);
    cache = tg_index_cache_create(bytes, entries);
    CHECK(cache != NULL);
}

/* A made-up blob name for index number k (the cache does not hash the content). */
static void blob_name(unsigned k, char out[TG_SHA256_HEX_LEN + 1])
{
    snprintf(out, TG_SHA256_HEX_LEN + 1, "%064u", k);
}

static void put_blob(const char *sha256, const char *text, size_t len)
{
    int fd = -1;
    char temp[4400];
    CHECK(tg_store_temp_create(&store, &fd, temp, sizeof temp) == 0);
    CHECK(tg_store_write_all(fd, text, len) == TG_STORE_OK);
    CHECK(tg_store_commit_blob(&store, fd, temp, sha256) == TG_STORE_OK);
}

/* Index k: names "m<k>.t<i>" for i < count, mapped to "s<k>-<i % 5>.safetensors".
 * Returns the blob's size. */
static size_t put_index(unsigned k, unsigned count)
{
    size_t cap = 64 + (size_t)count * 64, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text + len, cap - len, "{\"metadata\":{},\"weight_map\":{");
    for (unsigned i = 0; i < count; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s\"m%u.t%u\":\"s%u-%u.safetensors\"",
                                i ? "," : "", k, i, k, i % 5);
    len += (size_t)snprintf(text + len, cap - len, "}}");
    char sha[TG_SHA256_HEX_LEN + 1];
    blob_name(k, sha);
    put_blob(sha, text, len);
    free(text);
    return len;
}

/* True when the cache answers index k's entry i correctly. */
static bool answers(unsigned k, size_t size, unsigned i)
{
    char sha[TG_SHA256_HEX_LEN + 1], name[64], want[64], shard[64];
    blob_name(k, sha);
    snprintf(name, sizeof name, "m%u.t%u", k, i);
    snprintf(want, sizeof want, "s%u-%u.safetensors", k, i % 5);
    return tg_index_cache_lookup(cache, blobs, sha, size, name, shard, sizeof shard) ==
               TG_INDEX_FOUND &&
           strcmp(shard, want) == 0;
}

static tg_index_cache_stats stats_now(void)
{
    tg_index_cache_stats s;
    tg_index_cache_stats_get(cache, &s);
    return s;
}

static tg_index_lookup lookup(unsigned k, size_t size, const char *name)
{
    char sha[TG_SHA256_HEX_LEN + 1], shard[64];
    blob_name(k, sha);
    return tg_index_cache_lookup(cache, blobs, sha, size, name, shard, sizeof shard);
}

TEST(hits_after_one_parse)
{
    renew(TG_INDEX_CACHE_BYTES, TG_INDEX_CACHE_ENTRIES);
    size_t size = put_index(1, 1000);
    for (unsigned i = 0; i < 1000; i++)
        CHECK(answers(1, size, i));
    CHECK_EQ_U64(lookup(1, size, "m1.t1000"), TG_INDEX_ABSENT);
    CHECK_EQ_U64(lookup(1, size, "m1.t"), TG_INDEX_ABSENT);
    CHECK_EQ_U64(lookup(1, size, ""), TG_INDEX_ABSENT);
    tg_index_cache_stats s = stats_now();
    CHECK_EQ_U64(s.parses, 1);
    CHECK_EQ_U64(s.hits, 1002);
    CHECK_EQ_U64(s.entries, 1);
    /* five shard names are stored once: the map is smaller than the text */
    CHECK(s.bytes > 0 && s.bytes < size);
    /* a value longer than the caller's buffer is not cut */
    char sha[TG_SHA256_HEX_LEN + 1], small[8];
    blob_name(1, sha);
    CHECK_EQ_U64(tg_index_cache_lookup(cache, blobs, sha, size, "m1.t3", small, sizeof small),
                 TG_INDEX_UNUSABLE);
    /* an empty weight_map is an index with no names */
    blob_name(2, sha);
    put_blob(sha, "{\"weight_map\":{}}", 17);
    CHECK_EQ_U64(lookup(2, 17, "a"), TG_INDEX_ABSENT);
    /* escaped names and values are compared unescaped */
    blob_name(3, sha);
    const char *escaped = "{\"weight_map\":{\"a\\/b\\u00e9\":\"dir\\/x.safetensors\"}}";
    put_blob(sha, escaped, strlen(escaped));
    char shard[64];
    CHECK_EQ_U64(tg_index_cache_lookup(cache, blobs, sha, strlen(escaped), "a/b\xc3\xa9", shard,
                                       sizeof shard),
                 TG_INDEX_FOUND);
    CHECK_STR(shard, "dir/x.safetensors");
}

TEST(evicts_under_the_entry_bound)
{
    renew(TG_INDEX_CACHE_BYTES, 3);
    size_t sizes[6];
    for (unsigned k = 0; k < 6; k++)
        sizes[k] = put_index(10 + k, 50);
    for (unsigned k = 0; k < 6; k++) {
        CHECK(answers(10 + k, sizes[k], 7));
        CHECK(stats_now().entries <= 3);
    }
    tg_index_cache_stats s = stats_now();
    CHECK_EQ_U64(s.entries, 3);
    CHECK_EQ_U64(s.evictions, 3);
    CHECK_EQ_U64(s.parses, 6);
    /* the newest three are kept; the oldest was evicted and is parsed again */
    CHECK(answers(15, sizes[5], 8));
    CHECK_EQ_U64(stats_now().parses, 6);
    CHECK(answers(10, sizes[0], 8));
    CHECK_EQ_U64(stats_now().parses, 7);
    /* recency, not insertion order: kept 10, 15, 14 (newest first) */
    CHECK(answers(13, sizes[3], 1)); /* evicted by 10: parsed; evicts 14, the least recent */
    CHECK(answers(15, sizes[5], 1)); /* still kept */
    CHECK_EQ_U64(stats_now().parses, 8);
    CHECK(answers(14, sizes[4], 1)); /* evicted: parsed again */
    CHECK_EQ_U64(stats_now().parses, 9);
}

TEST(evicts_under_the_byte_bound)
{
    /* a 400-name index is about 13 KiB of text and 7 KiB of map: 32 KiB hold four */
    const size_t budget = 32 * 1024;
    renew(budget, 100);
    size_t per_map = 0, capacity = 0;
    for (unsigned k = 0; k < 10; k++) {
        size_t size = put_index(20 + k, 400);
        CHECK(size <= budget / 2);
        CHECK(answers(20 + k, size, 399));
        tg_index_cache_stats s = stats_now();
        if (k == 0) {
            per_map = s.bytes;
            capacity = budget / per_map;
            CHECK(capacity >= 2 && capacity < 10);
        }
        CHECK(s.bytes <= budget);
        CHECK_EQ_U64(s.entries, k + 1 < capacity ? k + 1 : capacity);
    }
    CHECK_EQ_U64(stats_now().parses, 10);
    CHECK_EQ_U64(stats_now().evictions, 10 - capacity);
}

TEST(too_big_indexes)
{
    /* an entry may take half the budget: 32 KiB */
    renew(64 * 1024, 100);
    /* above the entry bound: never read (the caller reads the shards' headers) */
    size_t size = put_index(30, 2000);
    CHECK(size > 32 * 1024);
    CHECK_EQ_U64(lookup(30, size, "m30.t1"), TG_INDEX_UNUSABLE);
    CHECK_EQ_U64(lookup(30, size, "m30.t1"), TG_INDEX_UNUSABLE);
    tg_index_cache_stats s = stats_now();
    CHECK_EQ_U64(s.parses, 0);
    CHECK_EQ_U64(s.not_read, 2);
    CHECK_EQ_U64(s.entries, 0);
    /* a text under the bound whose map is over it (many short names): this lookup is
     * answered from the parse, later ones are told to read the shards, without a
     * second parse */
    char sha[TG_SHA256_HEX_LEN + 1];
    blob_name(31, sha);
    size_t cap = 32 * 1024, len = 0;
    char *text = malloc(cap);
    len += (size_t)snprintf(text, cap, "{\"weight_map\":{");
    for (unsigned i = 0; len + 32 < cap; i++)
        len += (size_t)snprintf(text + len, cap - len, "%s\"%x\":\"s\"", i ? "," : "", i);
    len += (size_t)snprintf(text + len, cap - len, "}}");
    put_blob(sha, text, len);
    free(text);
    char shard[16];
    CHECK_EQ_U64(tg_index_cache_lookup(cache, blobs, sha, len, "a", shard, sizeof shard),
                 TG_INDEX_FOUND);
    CHECK_STR(shard, "s");
    CHECK_EQ_U64(tg_index_cache_lookup(cache, blobs, sha, len, "a", shard, sizeof shard),
                 TG_INDEX_UNUSABLE);
    s = stats_now();
    CHECK_EQ_U64(s.parses, 1);
    CHECK_EQ_U64(s.entries, 1);
    CHECK(s.bytes < 1024); /* only the mark */
}

TEST(malformed_and_unreadable)
{
    renew(TG_INDEX_CACHE_BYTES, TG_INDEX_CACHE_ENTRIES);
    const char *bad[] = {
        "not json",
        "{\"weight_map\":{\"a\":\"x\"",               /* cut */
        "[1,2]",                                      /* not an object */
        "{\"metadata\":{}}",                          /* no weight_map */
        "{\"weight_map\":[\"a\"]}",                   /* not an object */
        "{\"weight_map\":{\"a\":\"x\",\"b\":7}}",     /* a value that is not a string */
        "{\"weight_map\":{\"a\":\"x\",\"a\":\"y\"}}", /* a duplicate name */
        "{\"weight_map\":{\"a\":\"x\\u0000y\"}}",     /* NUL inside a value */
        "{\"weight_map\":{\"a\":\"x\"}} trailing",
    };
    size_t n = sizeof bad / sizeof bad[0];
    for (unsigned i = 0; i < n; i++) {
        char sha[TG_SHA256_HEX_LEN + 1];
        blob_name(40 + i, sha);
        put_blob(sha, bad[i], strlen(bad[i]));
        CHECK_EQ_U64(lookup(40 + i, strlen(bad[i]), "a"), TG_INDEX_UNUSABLE);
        CHECK_EQ_U64(lookup(40 + i, strlen(bad[i]), "a"), TG_INDEX_UNUSABLE);
    }
    tg_index_cache_stats s = stats_now();
    CHECK_EQ_U64(s.parses, n); /* remembered: parsed once each */
    CHECK_EQ_U64(s.hits, n);
    CHECK_EQ_U64(s.entries, n);
    /* a missing blob, and a blob shorter than the catalog says: not remembered */
    CHECK_EQ_U64(lookup(60, 100, "a"), TG_INDEX_UNUSABLE);
    CHECK_EQ_U64(lookup(60, 100, "a"), TG_INDEX_UNUSABLE);
    size_t size = put_index(61, 3);
    CHECK_EQ_U64(lookup(61, size + 10, "m61.t1"), TG_INDEX_UNUSABLE);
    s = stats_now();
    CHECK_EQ_U64(s.parses, n + 3);
    CHECK_EQ_U64(s.entries, n);
    /* the same blob with its right size is fine */
    CHECK(answers(61, size, 1));
    char shard[8];
    CHECK_EQ_U64(tg_index_cache_lookup(cache, blobs, "not-a-digest", 10, "a", shard, sizeof shard),
                 TG_INDEX_UNUSABLE);
}

/* ---- threads ---- */

#define THREADS 8
#define INDEXES 10
#define NAMES 300

static size_t thread_sizes[INDEXES];
static pthread_barrier_t start_line;

typedef struct worker {
    unsigned seed;
    unsigned rounds;
    unsigned wrong;
} worker;

static void *look_up_many(void *arg)
{
    worker *w = arg;
    pthread_barrier_wait(&start_line);
    for (unsigned r = 0; r < w->rounds; r++) {
        w->seed = w->seed * 1103515245u + 12345u;
        unsigned k = (w->seed >> 8) % INDEXES, i = (w->seed >> 16) % (NAMES + 10);
        if (i < NAMES) {
            if (!answers(100 + k, thread_sizes[k], i))
                w->wrong++;
        } else {
            char name[32];
            snprintf(name, sizeof name, "m%u.t%u", 100 + k, i);
            if (lookup(100 + k, thread_sizes[k], name) != TG_INDEX_ABSENT)
                w->wrong++;
        }
    }
    return NULL;
}

static void run_threads(unsigned rounds)
{
    pthread_t threads[THREADS];
    worker workers[THREADS];
    pthread_barrier_init(&start_line, NULL, THREADS);
    for (unsigned t = 0; t < THREADS; t++) {
        workers[t] = (worker){t * 7919u + 1, rounds, 0};
        CHECK(pthread_create(&threads[t], NULL, look_up_many, &workers[t]) == 0);
    }
    unsigned wrong = 0;
    for (unsigned t = 0; t < THREADS; t++) {
        pthread_join(threads[t], NULL);
        wrong += workers[t].wrong;
    }
    pthread_barrier_destroy(&start_line);
    CHECK_EQ_U64(wrong, 0);
}

TEST(threads_with_eviction)
{
    for (unsigned k = 0; k < INDEXES; k++)
        thread_sizes[k] = put_index(100 + k, NAMES);
    /* room for 3 of the 10 indexes: lookups race with parses and evictions */
    renew(TG_INDEX_CACHE_BYTES, 3);
    run_threads(1500);
    tg_index_cache_stats s = stats_now();
    CHECK(s.entries <= 3);
    CHECK(s.evictions > 0);
    CHECK_EQ_U64(s.hits + s.parses, THREADS * 1500);
    /* everything fits: each index is parsed once, however many threads miss at once */
    renew(TG_INDEX_CACHE_BYTES, TG_INDEX_CACHE_ENTRIES);
    run_threads(3000);
    s = stats_now();
    CHECK_EQ_U64(s.parses, INDEXES);
    CHECK_EQ_U64(s.entries, INDEXES);
    CHECK_EQ_U64(s.evictions, 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    snprintf(root, sizeof root, "/tmp/tg-index-cache-XXXXXX");
    char err[256];
    if (mkdtemp(root) == NULL || tg_store_open(&store, root, err, sizeof err) != 0 ||
        tg_blobstore_open(root, &blobs, err, sizeof err) != 0) {
        fprintf(stderr, "cannot make a store in %s\n", root);
        return 1;
    }
    RUN(hits_after_one_parse);
    RUN(evicts_under_the_entry_bound);
    RUN(evicts_under_the_byte_bound);
    RUN(too_big_indexes);
    RUN(malformed_and_unreadable);
    RUN(threads_with_eviction);
    tg_index_cache_destroy(cache);
    tg_blobstore_close(blobs);
    char command[128];
    snprintf(command, sizeof command, "rm -rf %s", root);
    if (system(command) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    return test_report(argv[0]);
}
